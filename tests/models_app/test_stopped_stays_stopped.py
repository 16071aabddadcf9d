"""A stopped deployment stays stopped: failures that follow from the stop (its engine losing the laptops the
stop let go, recovery giving up on them) do not turn it into "Failed" — the page after a restart said
"Failed" of deployments someone had stopped."""

from models_app.deploying import deploy
from models_app.models import Deployment, DeploymentStatus
from tests.jobs.standins import ready_deployment


def test_a_failure_after_a_stop_leaves_it_stopped(db):
    deployment = ready_deployment()
    deploy.stop(deployment)
    assert Deployment.objects.get(pk=deployment.pk).status == DeploymentStatus.STOPPED
    deploy.stop(deployment, DeploymentStatus.FAILED, "Laptop demo-2 stopped answering.")
    deployment.set_status(DeploymentStatus.READY, "Running again after a re-plan.")
    kept = Deployment.objects.get(pk=deployment.pk)
    assert (kept.status, kept.status_detail) == (DeploymentStatus.STOPPED,
                                                 "Stopped; every rpc-server of it is being shut down.")
    assert deployment.status == DeploymentStatus.STOPPED, "the caller's copy says so too"


def test_other_states_still_change(db):
    deployment = ready_deployment()
    deployment.set_status(DeploymentStatus.DEGRADED, "Running on 2 laptops.")
    deploy.stop(deployment, DeploymentStatus.FAILED, "No laptop left.")
    assert Deployment.objects.get(pk=deployment.pk).status == DeploymentStatus.FAILED
