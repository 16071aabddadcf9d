"""A laptop's rpc-server killed while the engine loads the model: the supervisor restarts the server, the engine
loads again onto it, and the deployment answers; nothing waits for a job to arrive to notice."""

from jobs.models import JobStatus
from models_app.deploying import deploy
from models_app.library.adding import ensure_bundled
from models_app.models import Deployment
from nodes.models import ActionKind, RpcServer
from nodes.remote import ssh
from tests.conftest import wait_until
from tests.jobs.cluster import chat, engine_ready
from tests.jobs.recovery.test_recovery_keeps_a_laptop_that_came_back import finished
from tests.nodes.laptops import register_all


def test_a_server_killed_while_the_engine_loads_is_restarted_and_the_engine_loads_again(lan, transactional_db,
                                                                                          supervisor, bob):
    deployment = deploy.create(ensure_bundled(), register_all(lan(3), then=ActionKind.PROBE), 512, mode="even")
    deploy.prepare(deployment)
    wait_until(lambda: Deployment.objects.get(pk=deployment.pk).engine.get("state") == "loading", 120,
               "the engine to begin loading")
    victim = deployment.stages.select_related("node", "server").get(position=1)
    ssh.run(victim.node.ssh_target(), ["kill", "-9", str(victim.server.pid)])
    engine_ready(deployment, within=240)
    deployment.refresh_from_db()
    server = RpcServer.objects.get(pk=victim.server_id)
    assert server.pid != victim.server.pid, "the supervisor restarted the killed server"
    assert deployment.engine["servers"][victim.node.name] == server.pid, "the engine's record names the new server"
    job = finished(chat(deployment, bob, "Say hello.", max_tokens=8), 120)
    assert job.status == JobStatus.SUCCEEDED, job.error
