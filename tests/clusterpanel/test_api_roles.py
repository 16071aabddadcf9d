"""Who may do what through the REST API, for every operation its schema lists: a plain user's token reaches no
lab admin's operation (403), even with a body that would be valid; nobody's token reaches another person's
job, batch or file (404); a read-only token changes nothing (403). An operation added without saying who may
call it fails here."""

import re

import pytest
from django.test import Client

from clusterpanel.accounts.models import ApiToken, Role, User
from jobs.batches import files
from jobs.models import Batch, Job, JobKind
from nodes.models import Node, NodeAction, RpcServer
from tests.jobs.standins import ready_deployment
from tests.rows import HOST_KEY

NODE_BODY = {"name": "lab-9", "host": "192.0.2.9", "username": "lab", "auth": "panel_key",
             "host_key_fingerprint": "SHA256:x"}
PLAN = {"model": "standin", "nodes": ["lab-1"]}
ADMIN = {  # (method, path) → a body that would pass validation
    ("GET", "/api/nodes/"): None, ("POST", "/api/nodes/host-key/"): {"host": "192.0.2.9"},
    ("POST", "/api/nodes/"): NODE_BODY, ("GET", "/api/nodes/{name}/"): None,
    ("PATCH", "/api/nodes/{name}/"): {"pipeline_order": 1}, ("DELETE", "/api/nodes/{name}/"): None,
    ("POST", "/api/nodes/{name}/actions/"): {"kind": "probe"}, ("GET", "/api/nodes/{name}/actions/"): None,
    ("GET", "/api/nodes/{name}/actions/{pk}/"): None, ("GET", "/api/nodes/{name}/actions/{pk}/events/"): None,
    ("GET", "/api/nodes/{name}/servers/"): None, ("PUT", "/api/nodes/{name}/servers/{port}/"): {"state": "stop"},
    ("GET", "/api/nodes/{name}/servers/{port}/log/"): None, ("GET", "/api/nodes/{name}/metrics/latest/"): None,
    ("GET", "/api/nodes/{name}/metrics/"): None,
    ("POST", "/api/nodes/actions/"): {"action": "probe", "nodes": ["lab-1"]}, ("GET", "/api/nodes/actions/"): None,
    ("GET", "/api/nodes/actions/events/"): None,
    ("POST", "/api/nodes/scans/"): {"addresses": "10.0.0.0/30"}, ("GET", "/api/nodes/scans/{pk}/"): None,
    ("GET", "/api/models/"): None, ("POST", "/api/models/"): {"path": "/nonexistent.gguf"},
    ("GET", "/api/models/{name}/"): None, ("PATCH", "/api/models/{name}/"): {"name": "other"},
    ("DELETE", "/api/models/{name}/"): None, ("POST", "/api/plans/"): PLAN, ("POST", "/api/deployments/"): PLAN,
    ("GET", "/api/models/{name}/on-call/"): None, ("PUT", "/api/models/{name}/on-call/"): {"idle_minutes": 5},
    ("DELETE", "/api/models/{name}/on-call/"): None,
    ("POST", "/api/deployments/{pk}/stop/"): None, ("POST", "/api/deployments/{pk}/verify/"): None,
    ("POST", "/api/deployments/{pk}/default/"): None, ("POST", "/api/deployments/{pk}/again/"): None,
    ("POST", "/api/deployments/{pk}/drafting/"): {"draft_tokens": 4},
    ("DELETE", "/api/deployments/{pk}/"): None, ("GET", "/api/deployments/{pk}/"): None,
    ("GET", "/api/deployments/{pk}/events/"): None, ("GET", "/api/deployments/{pk}/verification/"): None,
    ("GET", "/api/deployments/{pk}/verification/events/"): None,
    ("GET", "/api/uploads/"): None, ("POST", "/api/uploads/"): {"name": "m.gguf", "size": 1000},
    ("GET", "/api/uploads/{pk}/"): None, ("PATCH", "/api/uploads/{pk}/"): None, ("DELETE", "/api/uploads/{pk}/"): None,
    ("PATCH", "/api/limits/defaults/"): {"requests_per_minute": 9}, ("PATCH", "/api/limits/users/{username}/"):
    {"requests_per_minute": 9}, ("PATCH", "/api/limits/tokens/{pk}/"): {"requests_per_minute": 9},
}
AN_UPLOAD = "00000000-0000-4000-8000-000000000000"
EVERYONE = {
    ("GET", "/api/jobs/"), ("POST", "/api/jobs/"), ("GET", "/api/jobs/{pk}/"), ("POST", "/api/jobs/{pk}/cancel/"),
    ("GET", "/api/batches/"), ("POST", "/api/batches/"), ("GET", "/api/batches/{pk}/"),
    ("GET", "/api/batches/{pk}/events/"), ("POST", "/api/batches/{pk}/cancel/"), ("GET", "/api/batches/{pk}/results/"),
    ("DELETE", "/api/batches/{pk}/"), ("GET", "/api/deployments/"), ("GET", "/api/tokens/"), ("POST", "/api/tokens/"),
    ("DELETE", "/api/tokens/{pk}/"), ("GET", "/api/limits/defaults/"), ("GET", "/api/limits/users/{username}/"),
    ("GET", "/api/limits/tokens/{pk}/"), ("GET", "/api/usage/"),
}


@pytest.fixture
def lab(db):
    node = Node.objects.create(name="lab-1", host="192.0.2.1", username="lab", host_key=HOST_KEY)
    RpcServer.objects.create(node=node, port=50052)
    return {"name": "lab-1", "action": NodeAction.objects.create(node=node, kind="probe").pk,
            "deployment": ready_deployment().pk}


def operations() -> set[tuple[str, str]]:
    schema = Client().get("/api/schema/").json()
    return {(method.upper(), path) for path, methods in schema["paths"].items() for method in methods}


def filled(path: str, lab: dict) -> str:
    path = path.replace("{port}", "50052")
    if path.startswith("/api/nodes/{name}/actions/{pk}"):
        path = path.replace("{pk}", str(lab["action"]))
    path = path.replace("/api/models/{name}", "/api/models/standin").replace("{name}", lab["name"])
    path = path.replace("/api/uploads/{pk}", f"/api/uploads/{AN_UPLOAD}").replace("{username}", "bob")
    return path.replace("{pk}", str(lab["deployment"]))


def call(client: Client, method: str, path: str, body):
    send = getattr(client, method.lower())
    chunk_at = {"HTTP_UPLOAD_OFFSET": "0"}  # what an upload's chunk must carry; nothing else reads it
    return send(path, body, content_type="application/json", **chunk_at) if body is not None else send(path, **chunk_at)


def token(user, read_only: bool = False) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Bearer {ApiToken.issue(user, 'roles', read_only=read_only)[1]}")


def test_every_operation_says_who_may_call_it(db):
    unclassified = operations() - set(ADMIN) - EVERYONE
    assert not unclassified, f"say whether these are lab admins' or everyone's: {sorted(unclassified)}"


def test_a_plain_users_token_reaches_no_lab_admin_operation(lab, bob):
    client = token(bob)
    for (method, path), body in ADMIN.items():
        answer = call(client, method, filled(path, lab), body)
        assert answer.status_code == 403, (method, path, answer.status_code, answer.content[:200])
        assert re.match(r"Only lab admins can ", answer.json()["error"]), answer.json()
    assert Node.objects.filter(name="lab-1").exists() and not Node.objects.filter(name="lab-9").exists()


def test_nobody_reaches_another_persons_jobs_batches_or_files(lab, bob):
    carol = User.objects.create_user("carol", "c@example.org", "pw-long-enough-1", role=Role.USER)
    job = Job.objects.create(kind=JobKind.CHAT, user=carol, deployment_id=lab["deployment"],
                             messages=[{"role": "user", "content": "mine"}])
    batch = Batch.objects.create(user=carol, name="carol's", input_format="jsonl")
    file = files.store(carol, "carol.jsonl", b"{}")
    client = token(bob)
    for method, path in (("GET", f"/api/jobs/{job.pk}/"), ("POST", f"/api/jobs/{job.pk}/cancel/"),
                         ("GET", f"/api/batches/{batch.pk}/"), ("POST", f"/api/batches/{batch.pk}/cancel/"),
                         ("GET", f"/api/batches/{batch.pk}/results/"), ("DELETE", f"/api/batches/{batch.pk}/")):
        assert call(client, method, path, None).status_code == 404, (method, path)
    key = ApiToken.issue(bob, "client")[1]
    for path in (f"/v1/files/{file.public_id}", f"/v1/files/{file.public_id}/content", f"/v1/batches/batch_{batch.pk}"):
        assert Client(HTTP_AUTHORIZATION=f"Bearer {key}").get(path).status_code == 404, path
    assert job.pk not in [j["id"] for j in client.get("/api/jobs/").json()["results"]]


def test_a_read_only_token_changes_nothing(lab, alice):
    client = token(alice, read_only=True)
    changing = [(m, p) for m, p in operations() if m != "GET"]
    assert len(changing) >= 20
    for method, path in changing:
        answer = call(client, method, filled(path, lab), ADMIN.get((method, path)) or {})
        assert answer.status_code == 403 and "read-only" in answer.json()["error"], (method, path, answer.content)
    assert client.get("/api/nodes/").status_code == 200, "it reads"
    assert Node.objects.get(name="lab-1").pipeline_order == 0
