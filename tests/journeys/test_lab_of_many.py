"""A lab of many laptops, through the panel's own doors (issue 22): register N simulated laptops of 2 GB each
over the API confirming each host key, probe them, install the runtime, upload a model of 80 small layers with
scripts/upload-model, plan over all N, deploy, verify against the head alone, chat, kill one laptop's
rpc-server mid-answer and see the answer retried and finished on a re-planned deployment, stop: no rpc-server
left on any laptop.

N is 17 in `make test`, past llama.cpp's upstream 16 devices (scripts/llama_patches/); bench/lab_of_many.py runs
the same journey at 39, the seeds' lab, and writes each step's time (JOURNEY_REPORT) and photographs the plan,
deployment and dashboard pages (JOURNEY_SHOTS).

The panel runs as `make run` runs it: a Celery worker of four processes (CELERY_CONCURRENCY's default), so the
laptops' probes and installs go four at a time, and the supervisor checking each rpc-server once a second."""

import json
import os
import subprocess
import time
from pathlib import Path

import openai
import pytest
import requests

from clusterpanel.accounts.models import ApiToken
from jobs.models import Job
from models_app.models import Deployment
from nodes.models import RpcServer
from nodes.remote import ssh
from tests import services
from tests.conftest import wait_until
from tests.jobs.cluster import end_engines
from tests.models_app.gguf_files import write_loadable_model

LAPTOPS = int(os.environ.get("JOURNEY_LAPTOPS", "17"))
REPORT = os.environ.get("JOURNEY_REPORT")
SHOTS = os.environ.get("JOURNEY_SHOTS")
LAYERS = 80
ROOT = Path(__file__).resolve().parents[2]
QUESTION = [{"role": "user", "content": "Tell me about the laptops on the shelf."}]

pytestmark = pytest.mark.timeout(600 + 60 * LAPTOPS)


class Api(requests.Session):
    def __init__(self, base: str, key: str) -> None:
        super().__init__()
        self.base = base
        self.headers["Authorization"] = f"Bearer {key}"

    def request(self, method, url, *args, **kwargs):
        return super().request(method, url if url.startswith("http") else f"{self.base}{url}", *args, **kwargs)

    def last_event(self, url: str) -> dict:
        last = None
        with self.get(url, stream=True, timeout=1800) as answer:
            assert answer.status_code == 200, answer.text
            for line in answer.iter_lines(decode_unicode=True):
                if line.startswith("data: "):
                    last = json.loads(line.removeprefix("data: "))
        return last


class Steps:
    """Each step's wall time, for the benchmark's report."""

    def __init__(self) -> None:
        self.times: dict[str, float] = {}
        self.started = time.monotonic()

    def done(self, step: str) -> None:
        now = time.monotonic()
        self.times[step] = round(now - self.started, 2)
        self.started = now

    def write(self, **more) -> None:
        if REPORT:
            Path(REPORT).write_text(json.dumps({"laptops": LAPTOPS, "steps": self.times, **more}, indent=2))


@pytest.fixture
def celery_pool() -> list[str]:
    """The worker as `make run` starts it (clusterpanel/management/commands/runpanel.py): four processes, not the
    suite's one at a time, so the laptops' probes and installs go four at a time."""
    return ["--concurrency", "4"]


@pytest.fixture
def supervisor_interval() -> float:
    """`make run`'s interval, once a second (the suite's checks twice a second): each check of a server is an SSH
    command on its laptop, and here 17 laptops share this machine's cores."""
    return 1.0


@pytest.fixture
def shelf(lan_turn, web_server, celery_worker, supervisor, collector, alice):
    harness = services.lan_harness("shelf", "10.227.0.0/24")
    try:
        yield harness.up(LAPTOPS, memory="2G")
    finally:
        supervisor.terminate()
        supervisor.wait(30)
        end_engines()
        harness.down()


def rpc_servers_running(lan) -> list[str]:
    """The laptops on which a ggml-rpc-server process still runs."""
    found = subprocess.run(["ps", "-C", "ggml-rpc-server", "-o", "user="], capture_output=True, text=True).stdout
    users = set(found.split())
    return [laptop.name for laptop in lan.laptops if laptop.user in users]


def test_a_lab_of_many_laptops_through_the_panels_doors(shelf, web_server, alice, bob, tmp_path):
    steps = Steps()
    admin = Api(web_server, token := ApiToken.issue(alice, "shelf")[1])
    key = Path(shelf.key_path).read_text()
    names, probes = [], []
    for laptop in shelf.laptops:
        shown = admin.post("/api/nodes/host-key/", json={"host": laptop.address}).json()
        assert shown["fingerprint"] == laptop.host_key_fingerprint
        made = admin.post("/api/nodes/", json={"name": laptop.name, "host": laptop.address, "username": laptop.user,
                                               "auth": "private_key", "private_key": key,
                                               "host_key_fingerprint": shown["fingerprint"]})
        assert made.status_code == 201, made.text
        names.append(made.json()["name"])
        probes.append(made.json()["actions"][0]["events"])
    for name, events in zip(names, probes, strict=True):
        assert admin.last_event(events)["status"] == "succeeded", name
    steps.done("register and probe")

    installs = []
    for name in names:
        install = admin.post(f"/api/nodes/{name}/actions/", json={"kind": "install_runtime"})
        assert install.status_code == 202, install.text
        installs.append((name, install.json()["events"]))
    for name, events in installs:
        assert admin.last_event(events)["status"] == "succeeded", name
    steps.done("install the runtime")

    model_file = write_loadable_model(tmp_path / "shelf-80.gguf", layers=LAYERS, embd=256, ffn=512)
    uploaded = subprocess.run([str(ROOT / "scripts" / "upload-model"), str(model_file), "shelf-80"],
                              env={**os.environ, "PANEL": web_server, "TOKEN": token},
                              capture_output=True, text=True, timeout=600)
    assert uploaded.returncode == 0, uploaded.stderr
    steps.done("upload the model")

    wanted = {"model": "shelf-80", "nodes": names, "ctx": 512, "slots": 1, "mode": "even"}
    plan = admin.post("/api/plans/", json=wanted)
    assert plan.status_code == 200, plan.text
    even = plan.json()["modes"]["even"]
    assert sorted(s["machine"] for s in even["stages"] if s["count"] > 0 and s["machine"] != "head") == sorted(names)
    steps.done("plan")

    deployment = admin.post("/api/deployments/", json=wanted)
    assert deployment.status_code == 202, deployment.text
    final = admin.last_event(deployment.json()["events"])
    assert final["status"] == "ready" and final["engine"]["state"] == "ready", final
    pk = final["id"]
    assert len(admin.get(f"/api/deployments/{pk}/").json()["stages"]) == LAPTOPS
    steps.done("deploy until the engine is ready")

    asked = admin.post(f"/api/deployments/{pk}/verify/")
    assert asked.status_code == 202, asked.text
    verification = admin.last_event(f"/api/deployments/{pk}/verification/events/")["verification"]
    assert verification["result"] == "identical", verification
    steps.done("verify against the head alone")
    if SHOTS:
        photograph(web_server, pk, wanted)
        steps.done("photograph the pages")

    client = openai.OpenAI(base_url=f"{web_server}/v1", api_key=ApiToken.issue(bob, "c")[1], max_retries=0,
                           timeout=900)
    stream = client.chat.completions.create(model="shelf-80", messages=QUESTION, max_tokens=64, temperature=0,
                                            stream=True)
    victim = Deployment.objects.get(pk=pk).stages.select_related("node", "server").get(position=LAPTOPS // 2)
    arrivals, text, job_id, broken = [], [], None, None
    try:
        for chunk in stream:
            job_id = int(chunk.id.removeprefix("chatcmpl-"))
            if chunk.choices and chunk.choices[0].delta.content:
                arrivals.append(time.monotonic())
                text.append(chunk.choices[0].delta.content)
            if len(arrivals) == 16:
                steps.done("first 16 tokens")
                ssh.run(victim.node.ssh_target(), ["kill", "-9", str(victim.server.pid)])
    except openai.APIError as error:
        broken = error
    # A greedy answer's retry says the same again, and the stream goes on with it from where the client's text
    # ends (jobs/api/openai_views.py Caught); else the client hears which laptop stopped it.
    followed = broken is None
    assert len(arrivals) >= 16 and (followed or victim.node.name in str(broken)), (len(arrivals), broken)
    steps.done("the stream follows the retry, or the error reaches the client")
    retry = wait_until(lambda: Job.objects.filter(retry_of=job_id).first(), 300, "a retry")
    wait_until(lambda: Job.objects.get(pk=retry.pk).is_finished, 900, "the retry to finish")
    retry.refresh_from_db()
    assert retry.status == "succeeded" and retry.completion_tokens > 0, retry.error
    if followed:
        assert "".join(text) == retry.output, "the client's text is the retry's, whole and once"
    steps.done("the retried answer")
    after = admin.get(f"/api/deployments/{pk}/").json()
    assert after["status"] == "ready" and len(after["stages"]) == LAPTOPS, after["status_detail"]
    assert victim.node.name in {s["laptop"] for s in after["stages"]}, \
        "the laptop whose rpc-server the supervisor brought back keeps its layers"

    assert admin.post(f"/api/deployments/{pk}/stop/").json()["status"] == "stopped"
    wait_until(lambda: not rpc_servers_running(shelf), 120, "every rpc-server to end")
    assert not RpcServer.objects.filter(wanted=True).exists()
    steps.done("stop")
    steps.write(before={"tokens_per_second": 15 / (arrivals[15] - arrivals[0])},
                retry={"tokens": retry.completion_tokens, "tokens_per_second": decode_rate(retry),
                       "time_to_first_token": retry.time_to_first_token_s})


def decode_rate(job: Job) -> float | None:
    if job.first_token and job.finished and job.completion_tokens > 1:
        return (job.completion_tokens - 1) / (job.finished - job.first_token).total_seconds()
    return None


def photograph(web_server: str, pk: int, wanted: dict) -> None:
    """The plan, deployment and dashboard pages at this size, on a laptop screen and a phone."""
    from models_app.models import GgufModel
    from nodes.models import Node
    from tests.browser import browser, log_in
    from tests.conftest import PASSWORD

    model = GgufModel.objects.get(name=wanted["model"]).pk
    chosen = "&".join(f"nodes={n.pk}" for n in Node.objects.filter(name__in=wanted["nodes"]))
    pages = {"plan": f"/models/plan/?model={model}&ctx={wanted['ctx']}&mode=even&{chosen}",
             "deployment": f"/models/deployments/{pk}/", "dashboard": "/"}
    with browser() as chromium:
        page = chromium.new_page()
        log_in(page, web_server, "alice", PASSWORD)
        for size, (width, height) in {"desktop": (1440, 900), "phone": (390, 844)}.items():
            page.set_viewport_size({"width": width, "height": height})
            for name, path in pages.items():
                page.goto(web_server + path)
                page.wait_for_load_state("networkidle")
                time.sleep(3)  # live charts draw their first seconds
                page.screenshot(path=str(Path(SHOTS) / f"{name}-{LAPTOPS}-{size}.png"), full_page=True)
