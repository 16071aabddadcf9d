"""The place a waiting job is told is the truth: in queues of several people's chats and API requests, jobs
already running and batch items, claiming them one by one takes each when it is number 1, in the order of the
places told before the first claim, and that order is the rule written out here independently: by turn (what
the user has running plus the user's own jobs waiting ahead), then age; batch items after, batch by batch."""

from collections import Counter
from datetime import timedelta

from django.db import transaction
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusterpanel.accounts.models import User
from jobs.models import Batch, Job, JobKind, JobStatus
from jobs.queue import queueing

PEOPLE = 3  # and a fourth "person": jobs without a user
EXAMPLES = settings(max_examples=100, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

# One job: whose (a person's index, PEOPLE for none), which batch (None: a chat or API request), running or
# waiting, and its age in whole seconds (few distinct values, so jobs made in the same instant are common).
a_job = st.tuples(st.integers(0, PEOPLE), st.none() | st.integers(0, 2), st.booleans(), st.integers(0, 2))
# Whether the engine has a slot for a batch item at each claim.
a_claim = st.booleans()


def people() -> list[User | None]:
    made = [User.objects.get_or_create(username=f"person{n}")[0] for n in range(PEOPLE)]
    return [*made, None]


def make_jobs(deployment, drawn) -> list[Job]:
    who, start = people(), timezone.now()
    batches = [Batch.objects.create(user=who[0], deployment=deployment, name=f"{n}.jsonl", input_format="jsonl")
               for n in range(3)]
    return [Job.objects.create(kind=JobKind.COMPLETION, deployment=deployment, user=who[person], prompt="hi",
                               batch=batches[batch] if batch is not None else None,
                               status=JobStatus.RUNNING if running else JobStatus.QUEUED,
                               created=start + timedelta(seconds=age))
            for person, batch, running, age in drawn]


def by_the_rule(jobs: list[Job]) -> list[int]:
    """The waiting jobs' pks in the order the rule gives, worked out without the database."""
    running = Counter(job.user_id for job in jobs if job.status == JobStatus.RUNNING)
    waiting = sorted((job for job in jobs if job.status == JobStatus.QUEUED), key=lambda job: (job.created, job.pk))
    waited, people_first = Counter(), []
    for job in (job for job in waiting if job.batch_id is None):
        people_first.append((running[job.user_id] + waited[job.user_id], job.created, job.pk))
        waited[job.user_id] += 1
    items = sorted((job.batch_id, job.created, job.pk) for job in waiting if job.batch_id is not None)
    return [pk for _, _, pk in sorted(people_first)] + [pk for _, _, pk in items]


def places(pks: list[int]) -> dict[int, int]:
    return {pk: queueing.position(Job.objects.get(pk=pk)) for pk in pks}


@EXAMPLES
@given(drawn=st.lists(a_job, max_size=18), claims=st.lists(a_claim, min_size=18, max_size=18))
def test_it_claims_each_job_when_its_place_is_one_and_in_the_order_told(ready, drawn, claims):
    with transaction.atomic():
        jobs = make_jobs(ready, drawn)
        expected = by_the_rule(jobs)
        told = places(expected)
        assert sorted(told.values()) == list(range(1, len(expected) + 1)), "one place each, none shared"
        assert sorted(told, key=told.get) == expected

        claimed = []
        for batch_allowed in claims[:len(expected)]:  # as many as wait
            left = [pk for pk in expected if pk not in claimed]
            first = next(pk for pk, place in places(left).items() if place == 1)
            job = queueing.claim_next(ready.pk, batch_allowed=batch_allowed)
            if job is None:
                assert not batch_allowed and Job.objects.get(pk=first).batch_id is not None, "only items wait"
                job = queueing.claim_next(ready.pk)
            assert job.pk == first, "the job claimed was number 1 just before"
            claimed.append(job.pk)

        assert claimed == expected
        assert queueing.claim_next(ready.pk) is None
        transaction.set_rollback(True)  # the next example starts from an empty queue
