"""The plan page sets the pipeline order: the laptops named come first, in that order, in the plan and in
the deployment made from it; a laptop's own place (Laptops → Edit) orders the rest; a name that is not
planned on is refused in words. Every mode that fits is charted."""


from models_app.models import Deployment
from nodes.models import Node, NodeStatus
from tests.jobs.standins import ready_deployment
from tests.rows import HOST_KEY, client_for

GB = 1 << 30



def laptops() -> list[Node]:
    return [Node.objects.create(name=f"lab-{n}", host=f"192.0.2.{n}", username="lab", host_key=HOST_KEY,
                                usable_memory=4 * GB, speed_gb_s=10.0, status=NodeStatus.READY, pipeline_order=order)
            for n, order in ((1, 0), (2, 0), (3, 5))]


def machines(plan: dict) -> list[str]:
    return [stage["machine"] for stage in plan["stages"][1:]]


def test_the_order_named_on_the_plan_page_is_the_pipelines(alice):
    model = ready_deployment().model
    laptops()
    client = client_for(alice)
    own = client.get("/models/plan/", {"model": model.pk, "ctx": 256, "mode": "even"})
    assert machines(own.context["chosen"]) == ["lab-1", "lab-2", "lab-3"], "by each laptop's own place"
    page = client.get("/models/plan/", {"model": model.pk, "ctx": 256, "mode": "even", "order": "lab-3, lab-2"})
    assert machines(page.context["chosen"]) == ["lab-3", "lab-2", "lab-1"]
    assert "even (chosen)" in [chart["title"] for chart in page.context["charts"]]
    client.post("/models/deployments/new/", {"model": model.pk, "ctx": 256, "mode": "even", "slots": 1,
                                             "order": "lab-3, lab-2"})
    fresh = Deployment.objects.latest("pk")
    assert [s.node.name for s in fresh.stages.order_by("position")] == ["lab-3", "lab-2", "lab-1"]


def test_an_unknown_or_repeated_name_is_refused(alice):
    model = ready_deployment().model
    laptops()
    client = client_for(alice)
    for order, said in [("lab-9", "Not among the laptops planned on: lab-9."),
                        ("lab-1, lab-1", "Name each laptop once.")]:
        page = client.get("/models/plan/", {"model": model.pk, "ctx": 256, "mode": "even", "order": order})
        assert said in page.content.decode() and "results" not in page.context
