"""The engine child's loop (jobs/engine/loop.py) run in this process on a 4-slot deployment, every layer on
the head:
jobs run together, never more than the slots; a job that must run alone (Verify's) runs with nobody beside it;
a job asked to stop before it started ends cancelled; each job's answer is its own and, greedy, the same as it
gives alone."""

import pytest

from jobs.engine import loop
from jobs.models import Job, JobKind, JobStatus
from jobs.queue import ending, queueing, stream
from models_app.models import Deployment
from tests.jobs.cluster import GREEDY
from tests.jobs.conftest import engine_child_here, head_deployment
from tests.jobs.queue.test_many_at_once import most_at_once

pytestmark = pytest.mark.timeout(300)
SLOTS = 4


@pytest.fixture
def on_the_head(transactional_db) -> Deployment:
    return head_deployment(slots=SLOTS)


@pytest.fixture
def engine_here(on_the_head, monkeypatch):
    with engine_child_here(on_the_head, monkeypatch):
        yield


def ask(deployment: Deployment, user, text: str, **params) -> Job:
    return queueing.submit(Job(kind=JobKind.CHAT, deployment=deployment, user=user,
                               messages=[{"role": "user", "content": text}],
                               params={**GREEDY, "max_tokens": 24, **params}))


def test_jobs_run_together_up_to_the_slots_and_one_that_must_run_alone_runs_alone(on_the_head, engine_here, bob):
    first = [ask(on_the_head, bob, f"Name {n} fruits.") for n in range(2, 5)]
    alone = ask(on_the_head, bob, "Name 5 fruits.", alone=True)
    later = [ask(on_the_head, bob, f"Name {n} rivers.") for n in range(2, 6)]
    loop.run(first[0].pk)  # runs every waiting job of the deployment

    jobs = [Job.objects.get(pk=job.pk) for job in [*first, alone, *later]]
    assert {job.status for job in jobs} == {JobStatus.SUCCEEDED}, [job.error for job in jobs]
    assert most_at_once(jobs) == SLOTS, "four ran together, never more"
    lone = next(job for job in jobs if job.pk == alone.pk)
    beside = [job for job in jobs if job.pk != lone.pk and job.started < lone.finished and job.finished > lone.started]
    assert not beside, f"jobs {[job.pk for job in beside]} ran beside the one that must run alone"
    for job in jobs:
        pieces = [event["text"] for event in stream.kept(job.pk) if event.get("event") == "token"]
        assert "".join(pieces) == job.output and job.completion_tokens, "each job's stream is its own answer"

    again = ask(on_the_head, bob, "Name 5 fruits.")
    loop.run(again.pk)
    again.refresh_from_db()
    assert again.output == lone.output, "greedy: alone, the same answer again"


def test_a_job_asked_to_stop_before_it_started_ends_cancelled_and_the_others_run(on_the_head, engine_here, bob):
    stopped = ask(on_the_head, bob, "Name 3 fruits.")
    kept = ask(on_the_head, bob, "Name 3 rivers.")
    stream.store().set(ending.cancel_key(stopped.pk), 1, ex=60)  # the stop came while the engine was away
    loop.run(stopped.pk)
    stopped.refresh_from_db()
    kept.refresh_from_db()
    assert stopped.status == JobStatus.CANCELLED and stopped.finish_reason == "cancelled"
    assert (stopped.completion_tokens or 0) <= 1, "it stopped within one step"
    assert kept.status == JobStatus.SUCCEEDED and kept.output


def test_jobs_that_keep_arriving_do_not_hold_the_step_back(on_the_head, engine_here, bob, monkeypatch):
    """The loop claims every job waiting when it began claiming, and one that came meanwhile, then steps: the
    jobs of a burst that keep coming join at the next step. Here each claim brings a new request."""
    waiting = [ask(on_the_head, bob, f"Name {n} birds.") for n in (2, 3)]
    arrived, claim_next = [], queueing.claim_next

    def claim_as_another_arrives(*args, **kwargs):
        job = claim_next(*args, **kwargs)
        if job is not None and len(arrived) < 3:
            arrived.append(ask(on_the_head, bob, f"Name {len(arrived) + 4} trees."))
        return job

    monkeypatch.setattr(queueing, "claim_next", claim_as_another_arrives)
    loop.run(waiting[0].pk)
    first, second, *came = [Job.objects.get(pk=job.pk) for job in [*waiting, *arrived]]
    assert {job.status for job in [first, second, *came]} == {JobStatus.SUCCEEDED}
    assert second.started < first.first_token and came[0].started < first.first_token, \
        "the jobs waiting when it began, and the first to come meanwhile, in the first step"
    assert all(job.started >= first.first_token for job in came[1:]), "the others at the next one"
