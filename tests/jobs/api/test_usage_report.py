"""Usage: tokens in and out per day, person and model equal the sum of the ended jobs' tokens, on the page, in
/api/usage/ and in its CSV alike; a lab admin sees everyone's, a user their own; deleting the jobs takes nothing
back; /metrics counts tokens per person with a bounded label."""

import csv
import io
from datetime import timedelta

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.db.models import Sum
from django.test import Client
from django.utils import timezone

from clusterpanel.accounts.models import ApiToken, Role, User
from jobs.models import Job, Usage, utc_today
from jobs.prometheus import OTHER, people
from tests.jobs.standins import ended_job, ready_deployment
from tests.migrating import migrated_back
from tests.rows import client_for


def auth(user) -> dict:
    return {"HTTP_AUTHORIZATION": f"Bearer {ApiToken.issue(user, 'usage')[1]}"}


@pytest.fixture
def spent(ready, alice, bob) -> list[Job]:
    return [ended_job(ready, bob, 120, 30), ended_job(ready, bob, 7, 300), ended_job(ready, alice, 11, 2),
            ended_job(ready, None, 5, 5)]


def sums(jobs) -> tuple[int, int]:
    return sum(job.prompt_tokens for job in jobs), sum(job.completion_tokens for job in jobs)


def test_usage_equals_the_sum_of_the_jobs_tokens_and_the_csv_says_the_same(spent, alice, bob):
    everyone = Client().get("/api/usage/?all=1", **auth(alice))
    assert everyone.status_code == 200, everyone.content
    body = everyone.json()
    assert body["until"] == utc_today().isoformat()
    prompt, completion = sums(spent)
    assert (body["totals"]["prompt_tokens"], body["totals"]["completion_tokens"]) == (prompt, completion)
    assert body["totals"]["jobs"] == 4
    bobs = next(row for row in body["rows"] if row["user"] == "bob")
    assert (bobs["prompt_tokens"], bobs["completion_tokens"], bobs["jobs"], bobs["model"]) == (127, 330, 2, "tiny")
    assert bobs["total_tokens"] == 457
    assert {row["user"] for row in body["rows"]} == {"alice", "bob", "(no user)"}

    exported = Client().get("/api/usage/?all=1&format=csv", **auth(alice))
    assert exported["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(exported.content.decode())))
    assert [{name: str(value) for name, value in row.items()} for row in body["rows"]] == rows

    page = client_for(alice).get("/usage/?format=csv")
    assert list(csv.DictReader(io.StringIO(page.content.decode()))) == rows, "the page's CSV is the same"


def test_a_user_sees_only_their_own(spent, bob):
    own = Client().get("/api/usage/", **auth(bob)).json()
    assert {row["user"] for row in own["rows"]} == {"bob"}
    assert own["totals"]["total_tokens"] == 457
    for query in ("all=1", "user=alice"):
        refused = Client().get(f"/api/usage/?{query}", **auth(bob))
        assert refused.status_code == 403 and "lab admins" in refused.json()["error"]
    page = client_for(bob).get("/usage/").content.decode()
    assert 'id="total-tokens">457<' in page and "alice" not in page
    assert 'id="spent-today">457<' in page


def test_deleting_the_jobs_takes_nothing_back(spent, alice, bob):
    Job.objects.filter(user=bob).delete()
    rows = Client().get("/api/usage/?user=bob", **auth(alice)).json()["rows"]
    assert sum(row["total_tokens"] for row in rows) == 457


def test_a_range_of_days_in_words_or_refused_in_words(spent, alice):
    today = utc_today()
    earlier = Client().get(f"/api/usage/?all=1&since={today - timedelta(days=9)}&until={today - timedelta(days=1)}",
                           **auth(alice)).json()
    assert earlier["rows"] == [] and earlier["totals"]["jobs"] == 0
    for query, words in (("since=2026-13-01", "YYYY-MM-DD"), ("until=yesterday", "YYYY-MM-DD"),
                         ("since=2026-03-02&until=2026-03-01", "after"), ("since=2020-01-01&until=2026-01-01", "366")):
        refused = Client().get(f"/api/usage/?all=1&{query}", **auth(alice))
        assert refused.status_code == 400 and words in refused.json()["error"], (query, refused.content)
        page = client_for(alice).get(f"/usage/?{query}")
        assert page.status_code == 400 and words in page.content.decode()


def test_metrics_name_the_top_people_and_sum_the_rest(spent, settings, bob):
    settings.METRICS_TOP_USERS = 1
    carol = User.objects.create_user("carol", role=Role.USER)
    ended_job(spent[0].deployment, carol, 1, 1)
    prompt, completion = people()
    assert {sample.labels["user"]: sample.value for sample in completion.samples} == {"bob": 330, OTHER: 2 + 5 + 1}
    assert {sample.labels["user"]: sample.value for sample in prompt.samples} == {"bob": 127, OTHER: 11 + 5 + 1}
    total = Job.objects.aggregate(n=Sum("completion_tokens"))["n"]
    assert sum(sample.value for sample in completion.samples) == total


@pytest.mark.django_db(transaction=True)
def test_the_upgrade_counts_what_the_jobs_that_had_ended_spent(bob):
    deployment = ready_deployment()
    two_days_ago = timezone.now() - timedelta(days=2)
    with migrated_back([("jobs", "0010_tallies")]) as apps:
        old = apps.get_model("jobs", "Job")
        for prompt, answer, status, finished in ((10, 4, "succeeded", two_days_ago), (3, 2, "failed", two_days_ago),
                                                 (7, 1, "succeeded", timezone.now()), (9, 9, "queued", None)):
            old.objects.create(kind="chat", deployment_id=deployment.pk, user_id=bob.pk, messages=[], params={},
                               status=status, prompt_tokens=prompt, completion_tokens=answer, finished=finished)
        MigrationExecutor(connection).migrate([("jobs", "0011_usage_and_job_tokens")])
    counted = {(row.day, row.model): (row.prompt_tokens, row.completion_tokens, row.jobs)
               for row in Usage.objects.filter(user=bob)}
    assert counted == {(two_days_ago.date(), "standin"): (13, 6, 2), (utc_today(), "standin"): (7, 1, 1)}
