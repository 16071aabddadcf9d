"""/metrics' counters never go down between scrapes: deleting a conversation or a batch takes its jobs but not
what they counted; a running answer whose done event is already in its stream is not counted one token too
many; an answer cut short, ended by the panel for its engine, or requeued after its engine stopped keeps the
tokens it streamed; a scrape that cannot read Redis leaves the running deployments' token counter out rather
than lower it. Jobs that ended before the tallies existed are counted after the upgrade."""

import json
from datetime import timedelta

import pytest
import redis
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test import Client
from django.utils import timezone

from clusterpanel.accounts.models import ApiToken
from jobs.chat import edits
from jobs.engine import child
from jobs.models import Conversation, Job, JobKind, JobStatus, Tally
from jobs.queue import ending, stream
from tests.jobs.engine.test_prometheus import scraped, value
from tests.jobs.standins import ready_deployment
from tests.migrating import migrated_back


@pytest.fixture
def scraper(alice) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Bearer {ApiToken.issue(alice, 'prometheus', read_only=True)[1]}")


def ended(deployment, user, tokens: int, seconds: float, conversation=None) -> Job:
    """A job that ran and ends the way the engine ends one."""
    started = timezone.now() - timedelta(seconds=seconds)
    job = Job.objects.create(kind=JobKind.CHAT, deployment=deployment, user=user, messages=[], params={},
                             status=JobStatus.RUNNING, attempts=1, started=started, conversation=conversation)
    child.finish(job, JobStatus.SUCCEEDED, completion_tokens=tokens, output="x" * tokens,
                  first_token=started + timedelta(seconds=0.2))
    return job


def test_deleting_a_conversation_keeps_what_its_jobs_counted(db, bob, scraper):
    deployment = ready_deployment()
    names = {"deployment": deployment.pk, "model": deployment.model.name}
    chat = Conversation.objects.create(user=bob, title="Gone soon")
    ended(deployment, bob, 7, 3.0, conversation=chat)
    ended(deployment, bob, 5, 40.0)
    before = scraped(scraper)
    assert value(before, "clusterpanel_tokens_generated_total", **names) == 12
    assert value(before, "clusterpanel_job_duration_seconds_count", **names) == 2
    assert value(before, "clusterpanel_job_duration_seconds_bucket", le="5.0", **names) == 1
    assert value(before, "clusterpanel_job_duration_seconds_bucket", le="60.0", **names) == 2
    assert value(before, "clusterpanel_time_to_first_token_seconds_bucket", le="0.25", **names) == 2

    edits.delete(chat)  # as the chat page deletes one
    assert not Job.objects.filter(conversation=chat).exists()
    assert scraped(scraper) == before


def test_a_running_answer_is_counted_by_its_tokens_alone(db, bob, scraper):
    deployment = ready_deployment()
    names = {"deployment": deployment.pk, "model": deployment.model.name}
    ended(deployment, bob, 10, 1.0)
    job = Job.objects.create(kind=JobKind.CHAT, deployment=deployment, user=bob, messages=[], params={},
                             status=JobStatus.RUNNING, attempts=1, started=timezone.now())
    events = [{"event": "status", "status": "running"}, {"event": "context", "dropped": 2, "kept": 1},
              *({"event": "token", "text": "a", "t": 0} for _ in range(4))]
    store = stream.store()
    store.delete(stream.key(job.pk))
    store.rpush(stream.key(job.pk), *(json.dumps({"seq": n, **e}) for n, e in enumerate(events, start=1)))
    try:
        assert value(scraped(scraper), "clusterpanel_tokens_generated_total", **names) == 14
        store.rpush(stream.key(job.pk), json.dumps({"seq": 7, "event": "done", "status": "succeeded"}))
        assert value(scraped(scraper), "clusterpanel_tokens_generated_total", **names) == 14, \
            "its end is in the stream, its row still says running: the done event is no token"
    finally:
        store.delete(stream.key(job.pk))


def test_without_redis_a_running_deployments_token_counter_is_left_out(db, bob, scraper, monkeypatch):
    busy, idle = ready_deployment(), ready_deployment()
    ended(idle, bob, 3, 1.0)
    Job.objects.create(kind=JobKind.CHAT, deployment=busy, user=bob, messages=[], params={},
                       status=JobStatus.RUNNING, attempts=1, started=timezone.now())
    nowhere = redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.5)  # nothing listens on port 1
    monkeypatch.setattr(stream, "quick_store", lambda: nowhere)
    found = scraped(scraper)
    assert value(found, "clusterpanel_tokens_generated_total", deployment=busy.pk, model="standin") is None
    assert value(found, "clusterpanel_tokens_generated_total", deployment=idle.pk, model="standin") == 3
    assert value(found, "clusterpanel_deployment_slots_busy", deployment=busy.pk, model="standin") == 1


@pytest.mark.django_db(transaction=True)
def test_the_upgrade_tallies_the_jobs_that_had_ended(bob, alice):
    assert connection.vendor == "sqlite", "the tests' database (clusterpanel/settings.py)"
    deployment = ready_deployment()
    with migrated_back([("jobs", "0009_job_seconds")]) as apps:
        old = apps.get_model("jobs", "Job")
        for tokens, seconds, status in ((4, 2.0, "succeeded"), (6, 100.0, "failed"), (None, None, "queued")):
            old.objects.create(kind="chat", deployment_id=deployment.pk, user_id=bob.pk, messages=[], params={},
                               status=status, completion_tokens=tokens, duration_s=seconds,
                               time_to_first_token_s=seconds and seconds / 10)
        MigrationExecutor(connection).migrate([("jobs", "0010_tallies")])
    tally = {(t.name, t.bucket): (t.count, t.total) for t in Tally.objects.filter(deployment=deployment)}
    assert tally[("tokens", 0)][0] == 10
    assert tally[("duration_s", 4)][0] == 1 and tally[("duration_s", 12)] == (2, 102.0), "≤ 2.5 s: one; all: two"
    found = scraped(Client(HTTP_AUTHORIZATION=f"Bearer {ApiToken.issue(alice, 'p', read_only=True)[1]}"))
    names = {"deployment": deployment.pk, "model": "standin"}
    assert value(found, "clusterpanel_tokens_generated_total", **names) == 10
    assert value(found, "clusterpanel_job_duration_seconds_sum", **names) == 102.0


def test_an_answer_cut_short_keeps_the_tokens_it_was_counted_for(db, bob, scraper):
    deployment = ready_deployment()
    names = {"deployment": deployment.pk, "model": deployment.model.name}
    job = streaming(deployment, bob, 5)
    try:
        assert value(scraped(scraper), "clusterpanel_tokens_generated_total", **names) == 5
        child.finish(job, JobStatus.FAILED, error="Stopped: lap-2 stopped answering during generation.")
        assert value(scraped(scraper), "clusterpanel_tokens_generated_total", **names) == 5
    finally:
        stream.store().delete(stream.key(job.pk))


def test_a_job_ending_after_its_deployment_was_removed_still_ends(db, bob):
    """Stopped and removed at once while the engine's warm shutdown finishes the last answer."""
    deployment = ready_deployment()
    ended(deployment, bob, 2, 1.0)  # the deployment has tallies, which go with it
    job = Job.objects.create(kind=JobKind.CHAT, deployment=deployment, user=bob, messages=[], params={},
                             status=JobStatus.RUNNING, attempts=1, started=timezone.now())
    deployment.delete()
    child.finish(job, JobStatus.SUCCEEDED, completion_tokens=3, output="abc")
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCEEDED and job.deployment is None and not Tally.objects.exists()


def streaming(deployment, user, tokens: int) -> Job:
    """A running job whose stream holds `tokens` tokens."""
    job = Job.objects.create(kind=JobKind.CHAT, deployment=deployment, user=user, messages=[], params={},
                             status=JobStatus.RUNNING, attempts=1, started=timezone.now() - timedelta(seconds=2))
    events = [{"event": "status"}, *({"event": "token", "text": "a", "t": 0} for _ in range(tokens))]
    store = stream.store()
    store.delete(stream.key(job.pk))
    store.rpush(stream.key(job.pk), *(json.dumps({"seq": n, **e}) for n, e in enumerate(events, start=1)))
    return job


def test_a_job_the_panel_ended_for_its_engine_keeps_its_tokens_and_time(db, bob, scraper):
    deployment = ready_deployment()
    names = {"deployment": deployment.pk, "model": deployment.model.name}
    job = streaming(deployment, bob, 6)
    try:
        assert value(scraped(scraper), "clusterpanel_tokens_generated_total", **names) == 6
        ending.stop_unconfirmed(job.pk, 1)  # its engine never confirmed the stop
        found = scraped(scraper)
        assert Job.objects.get(pk=job.pk).status == JobStatus.CANCELLED
        assert value(found, "clusterpanel_tokens_generated_total", **names) == 6
        assert value(found, "clusterpanel_job_duration_seconds_count", **names) == 1
    finally:
        stream.store().delete(stream.key(job.pk))


def test_a_job_requeued_after_its_engine_stopped_keeps_the_tokens_it_streamed(db, bob, scraper):
    deployment = ready_deployment()
    names = {"deployment": deployment.pk, "model": deployment.model.name}
    job = streaming(deployment, bob, 4)
    try:
        ending.requeue(job)
        assert Job.objects.get(pk=job.pk).status == JobStatus.QUEUED
        assert value(scraped(scraper), "clusterpanel_tokens_generated_total", **names) == 4
    finally:
        stream.store().delete(stream.key(job.pk))
