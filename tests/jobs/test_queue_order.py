"""Which waiting job a deployment's engine runs next, and the place each waiting job is told: what people wait
for (chat, the APIs) before batch items, oldest first within each; batches in the order they came."""

import pytest

from jobs import queueing
from jobs.models import Batch, Job, JobKind, JobStatus


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
    queueing.cancel(gone)

    assert queueing.claim_next(ready.pk).pk == next_one.pk
    gone.refresh_from_db()
    assert gone.status == JobStatus.CANCELLED
