"""The dashboard reads the cluster at a glance: per deployment its queue, jobs running, who uses it and the
plan's prediction beside the measured rate; per laptop what it holds; what failed lately. A plain user's
dashboard shows the models ready and their own work."""

from django.utils import timezone

from jobs.models import Batch, Conversation, Job, JobKind, JobStatus
from models_app.models import DeploymentStage, DeploymentStatus
from nodes.models import ActionKind, ActionStatus, Node, NodeAction
from tests.jobs.standins import ready_deployment
from tests.rows import HOST_KEY, client_for


def job(deployment, user, status, **fields) -> Job:
    return Job.objects.create(kind=JobKind.CHAT, deployment=deployment, user=user, params={}, status=status,
                              messages=[{"role": "user", "content": "hi"}], **fields)


def test_the_admin_sees_queue_users_prediction_layers_and_failures(alice, bob, django_user_model):
    carol = django_user_model.objects.create_user("carol", "", "x" * 12)
    deployment = ready_deployment()
    deployment.plan = {"tokens_per_second": 12.345}
    deployment.save(update_fields=["plan"])
    node = Node.objects.create(name="lab-1", host="192.0.2.10", username="lab", host_key=HOST_KEY)
    DeploymentStage.objects.create(deployment=deployment, position=1, node=node, first_layer=0, layer_count=10,
                                   memory={})
    job(deployment, bob, JobStatus.RUNNING)
    job(deployment, carol, JobStatus.QUEUED)
    job(deployment, bob, JobStatus.FAILED, error="Laptop lab-1 stopped answering", finished=timezone.now())
    NodeAction.objects.create(node=node, kind=ActionKind.INSTALL_RUNTIME, status=ActionStatus.FAILED,
                              error="No space left on device", finished=timezone.now())
    client = client_for(alice)
    rows = client.get("/dashboard/deployments/").json()["deployments"]
    assert [(r["running"], r["interactive"], r["users"], r["predicted"]) for r in rows] == [
        (1, 1, ["bob", "carol"], 12.3)]
    page = client.get("/").content.decode()
    assert f"standin #{deployment.pk}: layers 0–9" in page
    assert "Laptop lab-1 stopped answering" in page and "Install runtime on lab-1" in page
    assert "No space left on device" in page and "bob, carol" in page


def test_a_stopped_deployment_holds_no_layers_on_the_dashboard(alice):
    deployment = ready_deployment(status=DeploymentStatus.STOPPED)
    node = Node.objects.create(name="lab-2", host="192.0.2.11", username="lab", host_key=HOST_KEY)
    DeploymentStage.objects.create(deployment=deployment, position=1, node=node, first_layer=0, layer_count=4,
                                   memory={})
    page = client_for(alice).get("/").content.decode()
    assert "holds nothing" in page and f"#{deployment.pk}: layers" not in page


def test_a_plain_user_sees_ready_models_and_their_own_work(bob, alice):
    deployment = ready_deployment()
    Conversation.objects.create(user=bob, title="Trip plans")
    Conversation.objects.create(user=alice, title="Alice's secret")
    batch = Batch.objects.create(user=bob, deployment=deployment, name="evals.csv", input_format="csv")
    Job.objects.create(kind=JobKind.BATCH_ITEM, deployment=deployment, user=bob, batch=batch, params={},
                       status=JobStatus.SUCCEEDED, messages=[{"role": "user", "content": "hi"}])
    job(deployment, alice, JobStatus.QUEUED)
    job(deployment, bob, JobStatus.QUEUED)
    response = client_for(bob).get("/")
    assert response.status_code == 200
    page = response.content.decode()
    assert "standin</strong>" in page and "Trip plans" in page and "Alice&#x27;s secret" not in page
    assert "evals.csv</a>: 1 of 1 done" in page
    assert "waiting, number 2 in line" in page
