"""An asleep on-call model on the simulated LAN, with the panel's real processes (web server, a worker, the
supervisor and the engine it starts): its first request, streamed with the real `openai` client, is answered once
the scheduler has loaded it onto its pool's laptop; idle past its idle time, the look-after unloads it, its
rpc-server leaves the laptop and the planner counts the laptop's memory free again; the next request wakes it."""

import time

import openai
import pytest

from clusterpanel.models import ApiToken
from jobs.queue import wakeup
from models_app import oncall
from models_app.library import ensure_bundled
from models_app.models import Deployment, DeploymentStatus, OnCallEvent
from models_app.planning import claimed_bytes
from nodes import ssh
from nodes.models import ActionKind, RpcServer, ServerStatus
from tests.conftest import wait_until
from tests.jobs.cluster import end_engines
from tests.nodes.laptops import register, run_now

pytestmark = pytest.mark.timeout(400)
ASK = [{"role": "user", "content": "Name three colours."}]


@pytest.fixture
def asleep(lan, transactional_db, supervisor, celery_worker):
    """The bundled model on call over one simulated laptop, nothing loaded."""
    node = register(lan(1), lan(1).laptops[0])
    assert run_now(node, ActionKind.PROBE).status == "succeeded"
    model = ensure_bundled()
    oncall.save(model, oncall.Settings([node], idle_minutes=1, ctx=512))
    yield model, node
    supervisor.terminate()
    supervisor.wait(30)
    end_engines()


def answer(api: openai.OpenAI, model: str) -> str:
    chunks = api.chat.completions.create(model=model, stream=True, max_tokens=8, temperature=0, messages=ASK)
    return "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices)


def rpc_servers_on(node) -> str:
    """The laptop's own rpc-servers (its user's: the simulated laptops share the machine's processes)."""
    found = ssh.run(node.ssh_target(), ["pgrep", "-u", node.username, "-x", "ggml-rpc-server"], timeout=10)
    return found.stdout.strip()


def test_an_asleep_model_answers_once_loaded_and_is_unloaded_when_idle(asleep, web_server, bob, settings):
    model, node = asleep
    assert oncall.state_of(model) == "asleep"
    api = openai.OpenAI(base_url=f"{web_server}/v1", api_key=ApiToken.issue(bob, "on call")[1], max_retries=0,
                        timeout=300)
    began = time.monotonic()
    first = answer(api, model.name)
    woke_in = time.monotonic() - began
    assert first.strip(), "the first request is answered once the model has loaded"
    deployment = Deployment.objects.get(model=model, on_call=True)
    assert deployment.status == DeploymentStatus.READY and oncall.state_of(model) == "ready"
    assert set(deployment.stages.values_list("node", flat=True)) == {node.pk}
    kinds = list(OnCallEvent.objects.filter(deployment=deployment).order_by("at", "pk").values_list("kind", flat=True))
    assert kinds == ["load", "loaded"], kinds
    assert rpc_servers_on(node), "its rpc-server runs on the laptop"

    settings.ONCALL_IDLE_MINUTE_S = 1  # its idle time, 1 "minute", is now a second
    wait_until(lambda: wakeup.look_after()["unloaded"], 30, "the idle deployment to be unloaded")
    deployment.refresh_from_db()
    assert deployment.status == DeploymentStatus.STOPPED and deployment.status_detail.startswith("No job for ")
    wait_until(lambda: not rpc_servers_on(node), 30, "its rpc-server to leave the laptop")
    assert not RpcServer.objects.filter(node=node, status=ServerStatus.RUNNING).exists()
    assert claimed_bytes([node]) == {}, "the planner counts the laptop's memory free again"
    assert oncall.state_of(model) == "asleep"

    began = time.monotonic()
    assert answer(api, model.name) == first, "the next request wakes it again, with the same greedy answer"
    print(f"first request answered after {woke_in:.1f} s, the second (caches pre-seeded) after "
          f"{time.monotonic() - began:.1f} s")
    assert Deployment.objects.filter(model=model, status=DeploymentStatus.READY, on_call=True).count() == 1
