"""The engine's slots and the queues, as pages and their JSON show them: busy slots and tokens/s from the engine's
dict (nothing for an old or partial one, 0 tokens/s once stale), each deployment's waiting jobs with interactive
ones and batch items apart, and the running jobs' labels for lab admins only."""

import time

import pytest

from jobs.models import Batch, Job, JobKind, JobStatus
from models_app.deploying.activity import engine_load
from models_app.models import Deployment
from tests.jobs.standins import ready_deployment

NOW = 1_800_000_000.0


@pytest.fixture
def deployment(db) -> Deployment:
    deployment = ready_deployment()
    deployment.plan = {"stages": []}
    deployment.save()
    return deployment


def engine(**fields) -> dict:
    return {"state": "ready", "slots": 4, "busy": 2, "jobs": [7, 9], "tokens_per_s": 31.25, "at": NOW - 1, **fields}


def test_it_reads_slots_and_a_fresh_rate_from_the_engine():
    load = engine_load(engine(), NOW)
    assert (load["slots"], load["busy"], load["free"], load["jobs"]) == (4, 2, 2, [7, 9])
    assert load["boxes"] == [True, True, False, False] and load["tokens_per_s"] == 31.25


def test_it_reads_what_drafting_kept_while_it_is_fresh_and_takes_odd_values():
    drafting = {"tokens": 8, "kept": 0.734, "per_trip": 2.41}
    assert engine_load(engine(draft=drafting), NOW)["draft"] == {"kept_percent": 73, "per_trip": 2.41}
    assert engine_load(engine(draft=drafting, at=NOW - 6), NOW)["draft"] is None, "stale: nothing drafts now"
    assert engine_load(engine(draft={"tokens": 8}), NOW)["draft"] is None, "nothing drafted since the last report"
    for odd in ("x", {"kept": "1", "per_trip": 2}, {"kept": float("nan"), "per_trip": 2.0}, None):
        assert engine_load(engine(draft=odd), NOW)["draft"] is None


def test_it_shows_0_tokens_per_s_once_the_rate_is_older_than_5_s():
    assert engine_load(engine(at=NOW - 4.5), NOW)["tokens_per_s"] == 31.25
    assert engine_load(engine(at=NOW - 6), NOW)["tokens_per_s"] == 0.0
    assert engine_load(engine(at=None), NOW)["tokens_per_s"] == 0.0


@pytest.mark.parametrize("old", [None, {}, {"state": "ready"}, {"state": "loading", "progress": 0.5},
                                 engine(state="failed"), engine(slots="4"), engine(slots=0), engine(slots=True)])
def test_it_says_nothing_for_an_old_partial_or_idle_engine(old):
    assert engine_load(old, NOW) is None


def test_it_takes_odd_values_without_failing():
    load = engine_load(engine(busy=9, jobs="7", tokens_per_s=float("nan")), NOW)
    assert (load["busy"], load["jobs"], load["tokens_per_s"]) == (4, [], 0.0)
    assert engine_load(engine(busy=None, jobs=[1, "x", -2, True]), NOW)["jobs"] == [1]


def test_the_deployment_page_shows_its_slots_and_nothing_without_them(client, alice, deployment):
    client.force_login(alice)
    url = f"/models/deployments/{deployment.pk}/"
    assert "Slots:" not in client.get(url).content.decode()
    Deployment.objects.filter(pk=deployment.pk).update(engine=engine(at=time.time()))
    page = client.get(url).content.decode()
    assert "Slots: 2 of 4 busy" in page and "31.3 tokens/s" in page and "Running: #7, #9" in page
    assert page.count('class="slot busy"') == 2 and page.count('class="slot"') == 2
    assert "slot-draft" not in page
    Deployment.objects.filter(pk=deployment.pk).update(engine=engine(at=time.time(), draft={
        "tokens": 8, "kept": 0.5, "per_trip": 1.75}))
    assert "drafts 50% kept, 1.75 tokens a step" in client.get(url).content.decode()


def queued(deployment, user, n: int, batch: Batch | None = None) -> None:
    for line in range(n):
        Job.objects.create(kind=JobKind.BATCH_ITEM if batch else JobKind.CHAT, deployment=deployment, user=user,
                           batch=batch, line=line + 1 if batch else None)


def test_the_dashboard_counts_each_deployments_waiting_jobs(client, alice, bob, deployment):
    other = ready_deployment()
    batch = Batch.objects.create(user=bob, deployment=deployment, name="b.jsonl", input_format="jsonl")
    queued(deployment, bob, 3)
    queued(deployment, bob, 5, batch)
    queued(other, alice, 1)
    Job.objects.create(kind=JobKind.CHAT, deployment=deployment, user=bob, status=JobStatus.RUNNING)
    Deployment.objects.filter(pk=deployment.pk).update(engine=engine(at=time.time()))
    client.force_login(alice)
    rows = {row["id"]: row for row in client.get("/dashboard/deployments/").json()["deployments"]}
    assert (rows[deployment.pk]["interactive"], rows[deployment.pk]["batch"]) == (3, 5)
    assert (rows[other.pk]["interactive"], rows[other.pk]["batch"], rows[other.pk]["load"]) == (1, 0, None)
    assert rows[deployment.pk]["load"]["busy"] == 2
    page = client.get("/").content.decode()
    assert f'<tr data-deployment="{deployment.pk}">' in page and "2 of 4" in page


def test_the_running_jobs_are_described_to_lab_admins_only(client, alice, bob, deployment):
    batch = Batch.objects.create(user=bob, deployment=deployment, name="b.jsonl", input_format="jsonl")
    chat = Job.objects.create(kind=JobKind.CHAT, deployment=deployment, user=bob, status=JobStatus.RUNNING)
    item = Job.objects.create(kind=JobKind.BATCH_ITEM, deployment=deployment, user=bob, batch=batch, line=4,
                              status=JobStatus.RUNNING)
    elsewhere = Job.objects.create(kind=JobKind.CHAT, deployment=ready_deployment(), user=bob)
    url = f"/models/deployments/{deployment.pk}/jobs/?ids={chat.pk},{item.pk},{elsewhere.pk}"
    client.force_login(bob)
    assert client.get(url).status_code == 403
    assert client.get("/dashboard/deployments/").status_code == 403
    client.force_login(alice)
    jobs = {job["id"]: job for job in client.get(url).json()["jobs"]}
    assert jobs == {chat.pk: {"id": chat.pk, "label": "chat of bob", "url": None},
                    item.pk: {"id": item.pk, "label": f"batch #{batch.pk}, line 4, of bob",
                              "url": f"/jobs/batches/{batch.pk}/"}}
    for bad in ("", "1,x", "²", "1," * 300, "9" * 40):
        answer = client.get(f"/models/deployments/{deployment.pk}/jobs/", {"ids": bad})
        assert answer.status_code == 400 and answer.json()["field"] == "ids"
