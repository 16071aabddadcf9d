"""Which waiting job a deployment's engine runs next, and the place each waiting job is told: what people wait
for (chat, the APIs) before batch items, oldest first within each; batches in the order they came."""

import pytest

from jobs.models import Batch, Job, JobKind, JobStatus
from jobs.queue import ending, queueing


@pytest.fixture
def make(ready, bob):
    def job(batch: Batch | None = None, status: str = JobStatus.QUEUED) -> Job:
        return Job.objects.create(kind=JobKind.COMPLETION, deployment=ready, user=bob, prompt="hi", batch=batch,
                                  params={"max_tokens": 4}, status=status)

    return job


@pytest.fixture
def batch(ready, bob):
    def one() -> Batch:
        return Batch.objects.create(user=bob, deployment=ready, name="b.jsonl", input_format="jsonl")

    return one


def test_a_chat_sent_after_a_batch_runs_before_its_waiting_items(make, batch, ready):
    first_batch, second_batch = batch(), batch()
    early = [make(first_batch) for _ in range(3)]
    later = [make(second_batch) for _ in range(2)]
    chat, api = make(), make()

    ran = [queueing.claim_next(ready.pk) for _ in range(7)]

    assert [job.pk for job in ran] == [job.pk for job in (chat, api, *early, *later)]
    assert all(job.status == JobStatus.RUNNING for job in ran)
    assert queueing.claim_next(ready.pk) is None, "nothing is left waiting"


def test_each_waiting_job_is_told_its_place_in_that_order(make, batch):
    items = [make(batch()) for _ in range(2)]
    chats = [make(), make()]
    make(status=JobStatus.RUNNING)  # under way: it takes no place

    assert [queueing.position(job) for job in chats] == [1, 2]
    assert [queueing.position(job) for job in items] == [3, 4]


def test_a_job_cancelled_while_waiting_is_passed_over(make, ready):
    gone, next_one = make(), make()
    ending.cancel(gone)

    assert queueing.claim_next(ready.pk).pk == next_one.pk
    gone.refresh_from_db()
    assert gone.status == JobStatus.CANCELLED


def test_jobs_made_in_the_same_instant_go_in_the_order_they_were_saved(make, ready):
    tied = [make(), make(), make()]
    Job.objects.filter(pk__in=[job.pk for job in tied]).update(created=tied[0].created)
    tied = [Job.objects.get(pk=job.pk) for job in tied]

    assert [queueing.position(job) for job in tied] == [1, 2, 3]
    assert [queueing.claim_next(ready.pk).pk for _ in tied] == [job.pk for job in tied]


def test_a_job_cancelled_between_being_chosen_and_claimed_is_passed_over(make, ready, monkeypatch):
    first, second = make(), make()
    claim = queueing.claim

    def cancelled_first(job_id: int, deployment_id: int | None = None):
        if job_id == first.pk:
            ending.cancel(first)  # the user's cancel lands just after claim_next chose this job
        return claim(job_id, deployment_id)

    monkeypatch.setattr(queueing, "claim", cancelled_first)
    assert queueing.claim_next(ready.pk).pk == second.pk
