"""A streamed answer that fails after it began ends in words: an error chunk and [DONE], its job cancelled. Once
the headers are out the server cannot answer 500, and a stream that raised was left open with nothing more to
come: a client in a 16-client bench waited on it for minutes, its job long cancelled."""

from types import SimpleNamespace

import pytest
from asgiref.sync import async_to_sync

from jobs.api.openai_views import Answer
from jobs.models import Job, JobKind, JobStatus


@pytest.fixture
def waiting(ready, bob) -> Job:
    return Job.objects.create(kind=JobKind.CHAT, deployment=ready, user=bob,
                              messages=[{"role": "user", "content": "Say hello."}])


def test_a_stream_that_fails_while_it_waits_ends_with_an_error_chunk_and_done(waiting, transactional_db):
    answer = Answer(waiting, SimpleNamespace(kind=JobKind.CHAT, stream=True), "tiny")

    async def fails(waits: str):
        yield f": {waits}\n\n"
        raise RuntimeError("database is locked")

    answer.keep_alive = fails

    async def read() -> list[str]:
        return [line async for line in answer.sse("queued, 1 ahead of it")]

    lines = async_to_sync(read)()
    assert lines[0].startswith(": queued")
    assert lines[-1] == "data: [DONE]\n\n"
    assert "database is locked" in lines[-2] and '"type": "server_error"' in lines[-2], lines[-2]
    assert Job.objects.get(pk=waiting.pk).status == JobStatus.CANCELLED, "nobody reads it any more"
