"""A conversation longer than the context keeps answering: on a 1024-token deployment, sixteen turns all get an
answer; once the oldest turns no longer fit, the model is given the newest ones and the page says so.

Each turn is a long question (53 tokens) and a short answer (8 tokens): a turn is ~72 tokens, so the oldest turns
are first left out at about turn 14, and the last turns answer past the context (the 2048 tokens and thirty turns
this test had took three minutes of a loaded machine's CI for the same checks). Answers cost the most per token
(a decode step at a time across the laptops, where a question is read in one batch), and a turn that leaves turns
out reads its whole prompt again (~1000 tokens, the longest step of all): 64-token answers made many such turns."""

import pytest
from django.test import Client

from jobs.chat import conversations
from jobs.models import Conversation, Job, JobStatus
from jobs.params import validate
from tests.conftest import wait_until

# Longer than the suite's 600 s: sixteen answers in a row, and a shared machine can stretch that.
pytestmark = pytest.mark.timeout(1200)

TURNS = 16
ANSWER_TOKENS = 8
QUESTION = ("Here is turn {n} of our long talk about lighthouses, harbours, ships, storms, tides, reefs and the brave "
            "people who keep the lights burning through the long night. Tell me one new fact about lighthouses, in "
            "one sentence.")


@pytest.fixture
def cluster_ctx() -> int:
    return 1024


def finished(job: Job, what: str) -> Job:
    wait_until(lambda: Job.objects.get(pk=job.pk).is_finished, 120, what)
    job.refresh_from_db()
    return job


def test_a_sixteen_turn_conversation_keeps_answering_and_says_what_was_left_out(cluster, bob):
    conversation = Conversation.objects.create(user=bob, system_prompt="You are a patient lighthouse expert.")
    params = validate({"temperature": 0, "max_tokens": ANSWER_TOKENS})
    answered = []
    for n in range(1, TURNS + 1):
        job = conversations.ask(conversation, QUESTION.format(n=n), params, cluster)
        job = finished(job, f"the answer to turn {n}")
        assert job.status == JobStatus.SUCCEEDED and job.output.strip(), f"turn {n}: {job.error}"
        assert job.prompt_tokens + ANSWER_TOKENS <= cluster.ctx, f"turn {n} left no room for its answer"
        answered.append(job)

    dropping = [job for job in answered if job.dropped_messages]
    assert dropping, "sixteen turns overflow 1024 tokens: older turns must have been left out"
    middle = answered[len(answered) // 2]
    assert answered[0].dropped_messages == 0 and answered[-1].dropped_messages > middle.dropped_messages

    # Until turns are left out, each turn finds the ones before it in the slot and reads only what is new.
    whole = next(n for n, job in enumerate(answered) if job.dropped_messages)
    for before, job in zip(answered[:whole - 1], answered[1:whole], strict=True):
        assert job.cached_tokens >= before.prompt_tokens - 1, f"job {job.pk} read its earlier turns again"
    reusing = sum(1 for job in answered if job.cached_tokens)

    client = Client()
    client.force_login(bob)
    page = client.get(f"/chat/{conversation.pk}/").content.decode()
    assert page.count("reused from the cache") == reusing
    assert page.count("Older turns no longer fit") == len(dropping)
    assert f"did not see the first {answered[-1].dropped_messages} messages" in page
