"""A laptop's rpc-server killed while the engine loads the model: the supervisor restarts the server, and the
deployment answers on it. Where the kill lands decides the path (the engine saw the restart as it loaded and loads
again, jobs/engine/child.py `reload_afresh`; or it reached the old server first, and the first job fails naming the
laptop and is retried), not the outcome: an answer, and the engine's record naming the server it really uses, which
recovery compares with to tell a laptop that failed later."""

from jobs.models import Job, JobStatus
from models_app.deploying import deploy
from models_app.library.adding import ensure_bundled
from models_app.models import Deployment
from nodes.models import ActionKind, RpcServer
from nodes.remote import ssh
from tests.conftest import wait_until
from tests.jobs.cluster import chat, engine_ready
from tests.jobs.recovery.test_recovery_keeps_a_laptop_that_came_back import finished
from tests.nodes.laptops import register_all


def test_a_server_killed_while_the_engine_loads_is_restarted_and_the_deployment_answers_on_it(
        lan, transactional_db, supervisor, bob):
    deployment = deploy.create(ensure_bundled(), register_all(lan(3), then=ActionKind.PROBE), 512, mode="even")
    deploy.prepare(deployment)
    wait_until(lambda: Deployment.objects.get(pk=deployment.pk).engine.get("state") == "loading", 120,
               "the engine to begin loading")
    victim = deployment.stages.select_related("node", "server").get(position=1)
    ssh.run(victim.node.ssh_target(), ["kill", "-9", str(victim.server.pid)])
    engine_ready(deployment, within=240)
    job = finished(chat(deployment, bob, "Say hello.", max_tokens=8), 120)
    if job.status != JobStatus.SUCCEEDED:  # the engine had reached the killed server: the job names the laptop
        assert victim.node.name in job.error, job.error
        job = finished(wait_until(lambda: Job.objects.filter(retry_of=job).first(), 120, "the retry"), 240)
    assert job.status == JobStatus.SUCCEEDED, job.error
    server = RpcServer.objects.get(pk=victim.server_id)
    assert server.pid != victim.server.pid, "the supervisor restarted the killed server"
    deployment.refresh_from_db()
    assert deployment.engine["servers"][victim.node.name] == server.pid, "the engine's record names the new server"
