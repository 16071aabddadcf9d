"""A new lab admin's morning through the API alone, on simulated laptops with the real web server, workers and
supervisor: register three laptops confirming each host key, probe them, install the runtime, plan, deploy the
bundled model and follow it until ready, verify it, ask a chat completion, run a batch through the official
`openai` client's Files and Batches calls and download its results, stop the deployment, remove a laptop.
Every JSON answer of /api/ is checked against the live OpenAPI schema."""

import json
import time
from pathlib import Path

import openai
import pytest
import requests
import schemathesis

from clusterpanel.accounts.models import ApiToken
from models_app.library.adding import ensure_bundled
from nodes.remote import ssh
from tests.jobs.cluster import end_engines
from tests.nodes.laptops import target

pytestmark = pytest.mark.timeout(1500)
QUESTION = {"role": "user", "content": "Name three colours."}


class Checked(requests.Session):
    """A script's session whose every /api/ JSON answer must match the schema."""

    def __init__(self, base: str, key: str) -> None:
        super().__init__()
        self.base, self.checked = base, 0
        self.headers["Authorization"] = f"Bearer {key}"
        self.schema = schemathesis.openapi.from_url(f"{base}/api/schema/")

    def request(self, method, url, *args, **kwargs):
        answer = super().request(method, url if url.startswith("http") else f"{self.base}{url}", *args, **kwargs)
        path = answer.request.path_url.split("?", 1)[0]
        if path.startswith("/api/") and answer.headers.get("Content-Type", "").startswith("application/json"):
            operation = self.schema.find_operation_by_path(method, path)
            assert operation is not None, f"{method} {path} is not in the schema"
            operation.validate_response(answer)
            self.checked += 1
        return answer

    def events(self, url: str) -> list[dict]:
        seen = []
        with self.get(url, stream=True, timeout=900) as answer:
            assert answer.status_code == 200, answer.text
            for line in answer.iter_lines(decode_unicode=True):
                if line.startswith("data: "):
                    seen.append(json.loads(line.removeprefix("data: ")))
        return seen


@pytest.fixture
def morning(lan, web_server, celery_worker, supervisor, alice):
    the_lan = lan(3)
    for laptop in the_lan.laptops:
        ssh.sh(target(the_lan, laptop), 'pkill -u "$(id -un)" -x ggml-rpc-server; true')
    ensure_bundled()  # the panel registers the bundled model when it starts
    yield the_lan
    supervisor.terminate()
    supervisor.wait(30)
    end_engines()


def test_a_lab_admins_morning_through_the_api_alone(morning, web_server, alice, bob):
    admin = Checked(web_server, ApiToken.issue(alice, "morning")[1])
    key = Path(morning.key_path).read_text()
    names = []
    for n, laptop in enumerate(morning.laptops[:3], start=1):
        shown = admin.post("/api/nodes/host-key/", json={"host": laptop.address}).json()
        assert shown["fingerprint"] == laptop.host_key_fingerprint
        made = admin.post("/api/nodes/", json={"name": f"lab-{n}", "host": laptop.address, "username": laptop.user,
                                               "auth": "private_key", "private_key": key,
                                               "host_key_fingerprint": shown["fingerprint"]})
        assert made.status_code == 201, made.text
        names.append(made.json()["name"])
        probe = made.json()["actions"][0]
        assert admin.events(probe["events"])[-1]["status"] == "succeeded"
    for name in names:
        install = admin.post(f"/api/nodes/{name}/actions/", json={"kind": "install_runtime"})
        assert install.status_code == 202, install.text
        assert admin.events(install.json()["events"])[-1]["status"] == "succeeded", name

    model = admin.get("/api/models/").json()["results"][0]["name"]
    wanted = {"model": model, "nodes": names, "ctx": 1024, "slots": 2, "mode": "even"}
    plan = admin.post("/api/plans/", json=wanted).json()
    assert all(s["count"] > 0 for s in plan["modes"]["even"]["stages"][1:]), plan["modes"]["even"]
    deployment = admin.post("/api/deployments/", json=wanted)
    assert deployment.status_code == 202, deployment.text
    final = admin.events(deployment.json()["events"])[-1]
    assert final["status"] == "ready" and final["engine"]["state"] == "ready", final
    pk = final["id"]

    asked = admin.post(f"/api/deployments/{pk}/verify/")
    assert asked.status_code == 202 and asked.json()["verification"]["result"] == "running", asked.text
    verification = admin.events(f"/api/deployments/{pk}/verification/events/")[-1]["verification"]
    assert verification["result"] == "identical", verification
    assert admin.get(f"/api/deployments/{pk}/verification/").json()["verification"] == verification

    client = openai.OpenAI(base_url=f"{web_server}/v1", api_key=ApiToken.issue(bob, "client")[1], max_retries=0,
                           timeout=600)
    answer = client.chat.completions.create(model=model, messages=[QUESTION], max_tokens=12, temperature=0)
    assert answer.choices[0].message.content

    lines = "".join(json.dumps({"custom_id": f"q{i}", "method": "POST", "url": "/v1/chat/completions",
                                "body": {"model": model, "messages": [QUESTION], "max_tokens": 8}}) + "\n"
                    for i in range(4)).encode()
    source = client.files.create(file=("questions.jsonl", lines), purpose="batch")
    batch = client.batches.create(input_file_id=source.id, endpoint="/v1/chat/completions", completion_window="24h")
    deadline = time.monotonic() + 600
    while (batch := client.batches.retrieve(batch.id)).status == "in_progress":
        assert time.monotonic() < deadline, "the batch did not finish"
        time.sleep(1)
    assert batch.status == "completed" and batch.request_counts.completed == 4, batch
    results = [json.loads(line) for line in client.files.content(batch.output_file_id).text.splitlines()]
    assert sorted(r["custom_id"] for r in results) == ["q0", "q1", "q2", "q3"]

    refused = admin.delete(f"/api/nodes/{names[0]}/")
    assert refused.status_code == 409 and "holds layers" in refused.json()["error"]
    assert admin.post(f"/api/deployments/{pk}/stop/").json()["status"] == "stopped"
    removed = admin.delete(f"/api/nodes/{names[0]}/")
    assert removed.status_code == 200 and removed.json()["removed"] == names[0], removed.text
    assert [n["name"] for n in admin.get("/api/nodes/").json()["results"]] == names[1:]
    assert admin.checked >= 15, "every JSON answer above was checked against the schema"
