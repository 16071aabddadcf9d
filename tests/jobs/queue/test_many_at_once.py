"""Many people at once on a 3-laptop deployment with 4 slots (continuous batching, jobs/engine/loop.py): eight chats
streamed together, a chat beside a batch that fills the other slots, one user's burst of requests beside
another's chat, and a conversation whose next turn reuses what its sequence already read."""

import asyncio
import threading

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator

from clusterpanel.asgi import application
from jobs.chat import conversations
from jobs.models import Batch, Conversation, Job, JobKind, JobStatus
from jobs.params import validate
from jobs.queue import ending, queueing, stream
from models_app.deploying import deploy
from models_app.models import Deployment
from tests.conftest import wait_until
from tests.jobs.batches.test_batch_survives_engine_restart import upload
from tests.jobs.cluster import GREEDY
from tests.jobs.cluster import chat as send_chat
from tests.nodes.test_live_updates import headers_for

SLOTS = 4
TOPICS = ["rivers", "mountains", "bridges", "lighthouses", "trains", "violins", "glaciers", "deserts"]


@pytest.fixture
def cluster_slots() -> int:
    return SLOTS


def most_at_once(jobs: list[Job]) -> int:
    """The most of these jobs running at any one moment, from their start and end times."""
    edges = sorted([(job.started, 1) for job in jobs] + [(job.finished, -1) for job in jobs])
    running = most = 0
    for _, change in edges:
        running += change
        most = max(most, running)
    return most


def listen_together(jobs: list[Job], user) -> dict[int, list[dict]]:
    """Every event each job's socket gets until it is done, all sockets open at once (one event loop: the
    channel layer serves one)."""
    headers = headers_for(user)

    async def one(job: Job) -> list[dict]:
        comm = WebsocketCommunicator(application, f"/ws/jobs/{job.pk}/", headers=headers)
        connected, _ = await comm.connect(timeout=30)
        assert connected
        events = []
        while not events or events[-1].get("event") != "done":
            events.append(await comm.receive_json_from(timeout=300))
        await comm.disconnect()
        return events

    async def all_of_them() -> list[list[dict]]:
        return await asyncio.gather(*(one(job) for job in jobs))

    return dict(zip([job.pk for job in jobs], async_to_sync(all_of_them)(), strict=True))


def test_eight_streamed_chats_on_four_slots_all_complete_four_at_a_time(cluster, bob):
    jobs = [send_chat(cluster, bob, f"Tell me about {topic}, in three sentences.", max_tokens=48)
            for topic in TOPICS]
    heard = listen_together(jobs, bob)
    assert len(heard) == len(jobs), "every listener heard its job end"

    done = [Job.objects.get(pk=job.pk) for job in jobs]
    for job in done:
        events = heard[job.pk]
        assert events[-1]["status"] == JobStatus.SUCCEEDED, events[-1]
        tokens = [event for event in events if event.get("event") == "token"]
        assert [event["seq"] for event in tokens] == sorted(event["seq"] for event in tokens), "in order"
        assert "".join(event["text"] for event in tokens) == job.output, "its own tokens, each once"
        assert job.finish_reason in ("stop", "length") and job.completion_tokens
        timings = job.timings()
        assert timings["time_to_first_token_s"] is not None and timings["total_s"] > 0
    assert len({job.output for job in done}) == len(done), "eight questions, eight different answers"
    assert most_at_once(done) == SLOTS, "four ran together, never more"


def a_chat_gets_the_slot_kept_for_people_while_a_batch_fills_the_rest(cluster, bob, alice) -> None:
    batch = upload(cluster, bob, lines=8)  # eight items of 40 tokens: three slots' worth and more waiting
    items = Batch.objects.get(pk=batch.pk).items
    most_batch = [0]
    watching = threading.Event()

    def watch() -> None:
        while not watching.is_set():
            most_batch[0] = max(most_batch[0], items.filter(status=JobStatus.RUNNING).count())
            watching.wait(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        wait_until(lambda: items.filter(status=JobStatus.RUNNING).count() == SLOTS - 1, 120, "the batch under way")
        asked = send_chat(cluster, alice, "Say hello to the lab.", max_tokens=16)
        wait_until(lambda: Job.objects.get(pk=asked.pk).is_finished, 120, "the chat's answer")
        asked.refresh_from_db()
        running_then = [job for job in items.all() if job.started and job.started <= asked.created
                        and (job.finished is None or job.finished > asked.created)]
    finally:
        watching.set()
        watcher.join(5)
    assert asked.status == JobStatus.SUCCEEDED, asked.error
    assert running_then, "items were running when the chat came"
    ended = [job.finished for job in Job.objects.filter(pk__in=[j.pk for j in running_then]) if job.finished]
    assert not ended or asked.started < min(ended), \
        "the chat started before any item running when it came had ended: a slot was kept for it"
    assert most_batch[0] <= SLOTS - 1, f"batch items held {most_batch[0]} slots of {SLOTS}"
    wait_until(lambda: not items.exclude(status=JobStatus.SUCCEEDED).exists(), 300, "the batch to finish")


def one_users_ten_requests_do_not_keep_anothers_chat_waiting(cluster, bob, alice) -> None:
    burst = [send_chat(cluster, bob, f"Count from {n} to {n + 20}.", max_tokens=24) for n in range(10)]
    wait_until(lambda: Job.objects.filter(pk__in=[j.pk for j in burst], status=JobStatus.RUNNING).exists(), 60,
               "bob's first requests running")
    asked = send_chat(cluster, alice, "Say hello to the lab.", max_tokens=16)
    waiting_then = set(Job.objects.filter(pk__in=[j.pk for j in burst], status=JobStatus.QUEUED)
                       .values_list("pk", flat=True))
    wait_until(lambda: not Job.objects.filter(pk__in=[asked.pk, *waiting_then]).exclude(
        status=JobStatus.SUCCEEDED).exists(), 300, "every request answered")
    asked.refresh_from_db()
    later = Job.objects.filter(pk__in=waiting_then)
    assert waiting_then, "bob's burst was still waiting when alice asked"
    assert all(asked.started <= job.started for job in later), \
        "alice's chat was claimed before every one of bob's requests still waiting when she asked"


def test_people_first_beside_a_batch_and_beside_another_users_burst(cluster, bob, alice):
    """Two checks of who goes first, one after the other on one deployment (each waits for its work to end)."""
    a_chat_gets_the_slot_kept_for_people_while_a_batch_fills_the_rest(cluster, bob, alice)
    one_users_ten_requests_do_not_keep_anothers_chat_waiting(cluster, bob, alice)


def test_a_conversations_fifth_turn_reuses_what_its_sequence_read(cluster, bob):
    conversation = Conversation.objects.create(user=bob, system_prompt="You are a patient lighthouse expert. " * 8)
    params = validate({"temperature": 0, "max_tokens": 40})
    turns = []
    for n in range(1, 6):
        question = f"Tell me fact number {n} about lighthouses, in one sentence."
        job = conversations.ask(conversation, question, params, cluster)
        wait_until(lambda job=job: Job.objects.get(pk=job.pk).is_finished, 120, f"the answer to turn {n}")
        job.refresh_from_db()
        assert job.status == JobStatus.SUCCEEDED, job.error
        turns.append(job)
    fifth, earlier = turns[-1], turns[-2]
    assert turns[0].cached_tokens == 0, "nothing was read before the first turn"
    assert fifth.cached_tokens >= earlier.prompt_tokens, \
        f"turn 5 found turn 4's prompt already read ({fifth.cached_tokens} of {fifth.prompt_tokens})"

    seeded = []
    for _ in range(2):  # the first after the conversation's turns, the second after itself
        job = queueing.submit(Job(kind=fifth.kind, deployment=cluster, user=bob, messages=fifth.messages,
                                  params={**GREEDY, "max_tokens": 40, "seed": 7}))
        wait_until(lambda job=job: Job.objects.get(pk=job.pk).is_finished, 120, "the same request with a seed")
        job.refresh_from_db()
        assert job.status == JobStatus.SUCCEEDED and job.prompt_tokens == fifth.prompt_tokens, job.error
        seeded.append(job)
    assert seeded[1].cached_tokens > 0, "it found its own earlier read, in the pieces it reads it in"
    assert seeded[0].output == seeded[1].output, "a request with a seed: the same answer, whatever was reused"

    deploy.set_drafting(cluster, 6, cluster.model)  # the model as its own draft, on the head: every guess its own
    drafted = queueing.submit(Job(kind=fifth.kind, deployment=cluster, user=bob, messages=fifth.messages,
                                  params={**GREEDY, "max_tokens": 40, "seed": 7}))
    wait_until(lambda: Job.objects.get(pk=drafted.pk).is_finished, 120, "the same request, drafted")
    drafted.refresh_from_db()
    assert drafted.output == seeded[0].output, "drafts change no greedy answer"
    assert drafted.drafted_tokens and drafted.accepted_tokens >= 0.9 * drafted.drafted_tokens, \
        (drafted.accepted_tokens, drafted.drafted_tokens)
    assert Deployment.objects.get(pk=cluster.pk).engine["draft"]["problem"] == ""


def test_a_long_prompt_is_read_in_pieces_while_a_running_stream_keeps_flowing(cluster, bob, alice):
    running = send_chat(cluster, bob, "Tell me a long story about a lighthouse keeper.", max_tokens=300)
    wait_until(lambda: len(stream.kept(running.pk)) > 5, 120, "the story under way")
    long = queueing.submit(Job(kind=JobKind.COMPLETION, deployment=cluster, user=alice,
                               prompt="lighthouse harbour ship storm " * 170, params={**GREEDY, "max_tokens": 4}))
    wait_until(lambda: Job.objects.get(pk=long.pk).is_finished, 180, "the long prompt's answer")
    long.refresh_from_db()
    assert long.status == JobStatus.SUCCEEDED and long.prompt_tokens > 600, (long.error, long.prompt_tokens)
    reading = (long.started.timestamp(), long.first_token.timestamp())
    beside = [event for event in stream.kept(running.pk)
              if event.get("event") == "token" and reading[0] < event["t"] < reading[1]]
    assert len(beside) >= 5, f"the story got {len(beside)} tokens while {long.prompt_tokens} prompt tokens were read"
    ending.cancel(Job.objects.get(pk=running.pk))
