"""An asleep on-call model on the simulated LAN, with the panel's real processes (web server, a worker, the
supervisor and the engine it starts): its first request, streamed with the real `openai` client, gets its headers
and a comment saying the model is loading at once, and is answered once the scheduler has loaded it onto its pool's
laptop; idle past its idle time, the look-after unloads it, its rpc-server leaves the laptop and the planner counts
the laptop's memory free again; the next request wakes it. A second model asleep while the first answers loads
onto the laptop the first left free, and the busy one is never touched."""

import json
import threading
import time
from dataclasses import dataclass, field

import openai
import pytest

from clusterpanel.accounts.models import ApiToken
from jobs.models import Job, JobStatus
from jobs.queue import wakeup
from models_app.library.adding import ensure_bundled, register_path
from models_app.models import Deployment, DeploymentStatus, OnCallEvent, WhenShort
from models_app.models import OnCallEventKind as Kind
from models_app.oncall import service as oncall
from models_app.planning.records import claimed_bytes
from nodes.models import ActionKind, RpcServer, ServerStatus
from nodes.remote import ssh
from tests.conftest import wait_until
from tests.jobs.cluster import end_engines
from tests.models_app.ternary_files import quantize, write_llama_model
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


@dataclass
class Streamed:
    headers_s: float = 0.0  # from the request to its response's headers
    headers_at: float = 0.0  # when they came, by the clock (time.time(): the panel's events use the same)
    comments: list[str] = field(default_factory=list)  # the SSE comments before the first token
    text: str = ""


def streamed(api: openai.OpenAI, model: str, max_tokens: int = 8, messages=ASK) -> Streamed:
    """A streamed request through the real client, read line by line to see what it hides: the headers' time and
    the keep-alive comments."""
    began, got = time.monotonic(), Streamed()
    with api.chat.completions.with_streaming_response.create(model=model, stream=True, max_tokens=max_tokens,
                                                             temperature=0, messages=messages) as response:
        got.headers_s, got.headers_at = time.monotonic() - began, time.time()
        for line in response.iter_lines():
            if line.startswith(":") and not got.text:
                got.comments.append(line)
            elif line.startswith("data: ") and line != "data: [DONE]":
                got.text += "".join(choice["delta"].get("content") or "" for choice in json.loads(line[6:])["choices"])
    return got


def answer(api: openai.OpenAI, model: str) -> str:
    chunks = api.chat.completions.create(model=model, stream=True, max_tokens=8, temperature=0, messages=ASK)
    return "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices)


def loading_said(got: Streamed) -> bool:
    return any("on call, asleep→loading" in comment for comment in got.comments)


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
    woken = streamed(api, model.name)
    woke_in, first = time.monotonic() - began, woken.text
    assert first.strip(), "the first request is answered once the model has loaded"
    assert loading_said(woken), woken.comments
    deployment = Deployment.objects.get(model=model, on_call=True)
    # Headers at once, while the model loads: 1 s on a quiet machine (docs/benchmarks.md). Checked against the
    # panel's own events, not a number of seconds: a CI machine held busy once took 8 s for them, and a minute
    # more to load the model.
    loaded_at = OnCallEvent.objects.get(deployment=deployment, kind=Kind.LOADED).at.timestamp()
    assert woken.headers_at < loaded_at, (woken.headers_s, woke_in, loaded_at - woken.headers_at)
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
    # The supervisor writes the row once it has seen the process go.
    wait_until(lambda: not RpcServer.objects.filter(node=node, status=ServerStatus.RUNNING).exists(), 30,
               "its rpc-server's row to say it stopped")
    assert claimed_bytes([node]) == {}, "the planner counts the laptop's memory free again"
    assert oncall.state_of(model) == "asleep"

    began = time.monotonic()
    assert answer(api, model.name) == first, "the next request wakes it again, with the same greedy answer"
    print(f"first request: headers after {woken.headers_s:.2f} s, answered after {woke_in:.1f} s; the second "
          f"(caches pre-seeded) after {time.monotonic() - began:.1f} s")
    assert Deployment.objects.filter(model=model, status=DeploymentStatus.READY, on_call=True).count() == 1


@pytest.fixture
def two_asleep(lan, transactional_db, supervisor, celery_worker, tmp_path):
    """Two laptops; the bundled model on call over the first, a small llama of our own on call over any laptop."""
    nodes = [register(lan(2), laptop) for laptop in lan(2).laptops[:2]]
    for node in nodes:
        assert run_now(node, ActionKind.PROBE).status == "succeeded"
    first = ensure_bundled()
    source = write_llama_model(tmp_path / "f16.gguf", layers=4, embd=512, ffn=1536)
    second = register_path(quantize(source, tmp_path / "second.gguf", "Q4_0"), name="second", checksum_now=True)
    oncall.save(first, oncall.Settings([nodes[0]], idle_minutes=5, ctx=512))
    oncall.save(second, oncall.Settings(None, idle_minutes=5, ctx=512, when_short=WhenShort.EVICT))
    yield first, second, nodes
    supervisor.terminate()
    supervisor.wait(30)
    end_engines()


def test_a_second_model_asleep_while_the_first_answers_loads_onto_the_free_laptop(two_asleep, web_server, bob):
    first, second, nodes = two_asleep
    api = openai.OpenAI(base_url=f"{web_server}/v1", api_key=ApiToken.issue(bob, "on call")[1], max_retries=0,
                        timeout=300)
    assert answer(api, first.name).strip(), "the first model loaded onto the first laptop"
    long = [{"role": "user", "content": "Tell me a long story about a lighthouse keeper and the sea."}]
    busy = {}
    talking = threading.Thread(target=lambda: busy.update(got=streamed(api, first.name, 256, long)), daemon=True)
    talking.start()
    running = wait_until(lambda: Job.objects.filter(deployment__model=first, status=JobStatus.RUNNING).first(), 60,
                         "the first model's long answer to start")
    woken = streamed(api, second.name)
    talking.join(300)
    assert woken.text.strip() and loading_said(woken), woken
    deployment = Deployment.objects.get(model=second, on_call=True)
    assert set(deployment.stages.values_list("node", flat=True)) == {nodes[1].pk}, "onto the laptop left free"
    running.refresh_from_db()
    assert running.finished > deployment.created, "the first model was answering when the second was woken"
    assert running.status == JobStatus.SUCCEEDED and busy["got"].text.strip(), "and its answer went on to the end"
    assert Deployment.objects.filter(model=first, on_call=True, status=DeploymentStatus.READY).count() == 1
    assert not OnCallEvent.objects.filter(kind=Kind.EVICT).exists(), "with a laptop free, nothing is evicted"
