"""The REST API for scripts: jobs (own only, admins all), cancel, deployments, laptops for admins, pages."""

import pytest
from django.test import Client

from jobs.models import Job, JobStatus
from models_app.models import Deployment, DeploymentStatus
from nodes.models import Node
from tests.jobs.conftest import bearer

HI = [{"role": "user", "content": "Hi"}]


@pytest.fixture
def bob_api(bob):
    return Api(bearer(bob))


class Api:
    def __init__(self, headers: dict) -> None:
        self.client, self.headers = Client(), headers

    def get(self, url: str):
        return self.client.get(url, **self.headers)

    def post(self, url: str, body=None):
        return self.client.post(url, body or {}, content_type="application/json", **self.headers)


def test_it_creates_a_job_and_tells_its_place_in_the_queue(ready, bob_api, bob):
    first = bob_api.post("/api/jobs/", {"messages": HI, "params": {"temperature": 0, "max_tokens": 8}})
    second = bob_api.post("/api/jobs/", {"kind": "completion", "prompt": "Once", "deployment": ready.pk})
    assert first.status_code == second.status_code == 201
    assert first.json()["status"] == "queued" and first.json()["position"] == 1 and second.json()["position"] == 2
    job = Job.objects.get(pk=first.json()["id"])
    assert job.user == bob and job.deployment == ready and job.params["max_tokens"] == 8
    assert job.params["temperature"] == 0 and Job.objects.get(pk=second.json()["id"]).prompt == "Once"
    detail = bob_api.get(f"/api/jobs/{job.pk}/").json()
    assert detail["messages"] == HI and detail["position"] == 1 and "timings" in detail and detail["output"] == ""


def test_it_cancels_a_queued_job_and_refuses_twice(ready, bob_api):
    job = bob_api.post("/api/jobs/", {"messages": HI}).json()
    cancelled = bob_api.post(f"/api/jobs/{job['id']}/cancel/")
    assert cancelled.status_code == 200 and cancelled.json()["status"] == JobStatus.CANCELLED
    again = bob_api.post(f"/api/jobs/{job['id']}/cancel/")
    assert again.status_code == 409 and "cancelled" in again.json()["error"]


def test_it_hides_other_peoples_jobs_behind_404(ready, alice, bob_api):
    alices = Api(bearer(alice)).post("/api/jobs/", {"messages": HI}).json()["id"]
    assert bob_api.get(f"/api/jobs/{alices}/").status_code == 404
    assert bob_api.post(f"/api/jobs/{alices}/cancel/").status_code == 404
    assert bob_api.get(f"/api/jobs/{alices + 1000}/").status_code == 404
    assert bob_api.get("/api/jobs/").json()["count"] == 0
    assert Job.objects.get(pk=alices).status == JobStatus.QUEUED


def test_it_lists_everyones_jobs_for_lab_admins_only(ready, alice, bob_api):
    bob_api.post("/api/jobs/", {"messages": HI})
    admin = Api(bearer(alice))
    admin.post("/api/jobs/", {"messages": HI})
    assert admin.get("/api/jobs/").json()["count"] == 1
    everyone = admin.get("/api/jobs/?all=1").json()
    assert everyone["count"] == 2 and {j["user"] for j in everyone["results"]} == {"alice", "bob"}
    assert bob_api.get("/api/jobs/?all=1").status_code == 403


def test_it_pages_lists_with_limit_and_offset(ready, bob_api):
    ids = [bob_api.post("/api/jobs/", {"messages": HI}).json()["id"] for _ in range(5)]
    first = bob_api.get("/api/jobs/?limit=2").json()
    assert first["count"] == 5 and [j["id"] for j in first["results"]] == ids[::-1][:2]
    assert first["next"] == "/api/jobs/?limit=2&offset=2"
    last = bob_api.get("/api/jobs/?limit=2&offset=4").json()
    assert [j["id"] for j in last["results"]] == [ids[0]] and last["next"] is None
    for bad in ("limit=0", "limit=abc", "limit=1000", "offset=-1"):
        answer = bob_api.get(f"/api/jobs/?{bad}")
        assert answer.status_code == 400 and answer.json()["field"] == bad.split("=")[0]


def test_it_lists_deployments_with_their_plan(ready, bob_api):
    listed = bob_api.get("/api/deployments/").json()["results"]
    assert listed == [{"id": ready.pk, "model": "tiny", "model_ids": ["tiny", f"deployment-{ready.pk}"],
                       "status": "ready", "ctx": 1024, "slots": 1, "draft_tokens": 0, "draft_model": None,
                       "is_default": True,
                       "created": ready.created.isoformat(),
                       "plan": {"mode": "even", "tokens_per_second": 1.0, "bottleneck": "head",
                                "stages": [{"machine": "head", "device": "CPU", "first_layer": 0, "layers": 2}]}}]


def test_it_lists_laptops_for_lab_admins_only(db, alice, bob_api):
    Node.objects.create(name="lab-1", host="10.232.0.99", username="u",
                        host_key="ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJRvvesEHT9Lj/odiUekLSyxfHkxh+kIRGnuGyJVpB1/")
    assert bob_api.get("/api/nodes/").status_code == 403
    laptops = Api(bearer(alice)).get("/api/nodes/").json()["results"]
    assert [n["name"] for n in laptops] == ["lab-1"] and laptops[0]["status"] == "new"


def test_models_lists_ready_deployments_default_first(ready, bob_api):
    newer = Deployment.objects.create(model=ready.model, ctx=512, plan=ready.plan, status=DeploymentStatus.READY)
    Deployment.objects.create(model=ready.model, ctx=512, plan=ready.plan, status=DeploymentStatus.STOPPED)
    listed = bob_api.get("/v1/models").json()
    assert listed["object"] == "list"
    assert [m["id"] for m in listed["data"]] == ["tiny", f"deployment-{ready.pk}", f"deployment-{newer.pk}"]
    assert listed["data"][0]["deployment"] == ready.pk, "a model's name means its default deployment"
