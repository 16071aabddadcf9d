"""`manage.py demo --reset` puts the demo back to before its first start: its laptops and deployments go,
everyone's conversations and jobs stay, and laptops that are not the demo's are untouched."""

from django.core.management import call_command

from jobs.models import Conversation, Job, JobKind, JobStatus
from models_app.models import Deployment, DeploymentStage
from nodes.models import Node
from tests.jobs.standins import ready_deployment
from tests.rows import HOST_KEY
from tests.services import slotted


def test_reset_removes_the_demo_and_keeps_everyone_elses_work(bob, capsys, settings):
    # This run's own demo LAN: the reset also takes down its namespaces, never another run's or a panel's.
    settings.DEMO_LAN_NAME, settings.DEMO_LAN_SUBNET = slotted("tdemo", "10.228.0.0/24")
    deployment = ready_deployment()
    demo = [Node.objects.create(name=f"{settings.DEMO_LAN_NAME}-{n}", host=f"10.230.0.{10 + n}", username="u",
                                host_key=HOST_KEY) for n in (1, 2, 3)]
    lab = Node.objects.create(name="lab-1", host="192.0.2.1", username="u", host_key=HOST_KEY)
    for position, node in enumerate(demo):
        DeploymentStage.objects.create(deployment=deployment, position=position, node=node, first_layer=position,
                                       layer_count=1, memory={})
    conversation = Conversation.objects.create(user=bob, deployment=deployment, title="Kept")
    job = Job.objects.create(kind=JobKind.CHAT, deployment=deployment, user=bob, conversation=conversation,
                             params={}, messages=[{"role": "user", "content": "hi"}], status=JobStatus.SUCCEEDED,
                             output="hello")
    call_command("demo", "--reset")
    assert "Demo reset" in capsys.readouterr().out
    assert list(Node.objects.values_list("name", flat=True)) == ["lab-1"] and Node.objects.get(pk=lab.pk)
    assert not Deployment.objects.filter(pk=deployment.pk).exists()
    job.refresh_from_db()
    assert job.output == "hello" and job.conversation_id == conversation.pk and job.deployment is None
