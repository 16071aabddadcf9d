"""Every job an engine claimed ends, with the reason shown, and its conversation takes a new message afterwards:
when the model's chat template refuses the messages, when Redis is unreachable as the job starts, when a stop
finds no engine to stop it (its deployment is gone, or its engine never confirms), and when jobs were left
on a deployment that is gone (an ordinary worker settles them as it starts; a degraded one's are recovery's)."""

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.utils import timezone

from clusterpanel.run.redis_server import RedisServer
from jobs.chat import conversations
from jobs.engine import leftovers, loop
from jobs.models import Conversation, Job, JobKind, JobStatus
from jobs.params import Params
from jobs.queue import ending, queueing, stream
from models_app.deploying import deploy
from models_app.library.adding import register_path
from models_app.library.bundled import bundled_model_path
from models_app.models import Deployment, DeploymentStatus
from nodes.models import ActionKind, RpcServer, ServerStatus
from tests.celery_workers import start_worker
from tests.conftest import stop, wait_until
from tests.jobs.cluster import end_engines, engine_ready, listen
from tests.jobs.conftest import as_engine_child
from tests.jobs.standins import streamed
from tests.nodes.laptops import register_all

# Gemma's own rules, as its chat template states them: no system role, and strictly alternating turns.
STRICT_TEMPLATE = (
    "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}"
    "{% endif %}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
BRIEF = Params(max_tokens=8, temperature=0.0)


def with_chat_template(source: Path, target: Path, template: str) -> Path:
    """A copy of a GGUF file with another chat template; weights and everything else as they were."""
    subprocess.run([sys.executable, "-m", "gguf.scripts.gguf_new_metadata", "--chat-template", template,
                    "--force", str(source), str(target)], check=True, capture_output=True)
    return target


@pytest.fixture
def strict_cluster(lan, transactional_db, supervisor, tmp_path):
    """The bundled model with a chat template that refuses system prompts, on two laptops, with its engine."""
    laptops = register_all(lan(3), then=ActionKind.PROBE)
    model = register_path(with_chat_template(bundled_model_path(), tmp_path / "strict.gguf", STRICT_TEMPLATE),
                          name="strict", checksum_now=True)
    deployment = deploy.create(model, laptops[:2], 1024, mode="even", preseed=False)
    deploy.prepare(deployment)
    deployment.refresh_from_db()
    assert deployment.status == DeploymentStatus.READY, deployment.status_detail
    engine_ready(deployment)
    yield deployment
    deploy.stop(deployment)
    wait_until(lambda: not RpcServer.objects.exclude(status=ServerStatus.STOPPED).exists(), 30, "servers stopped")
    supervisor.terminate()
    supervisor.wait(30)
    end_engines()


@pytest.fixture
def conversation(bob, ready) -> Conversation:
    return Conversation.objects.create(user=bob, deployment=ready)


@pytest.fixture
def claimed(conversation, bob, ready) -> Job:
    """A chat job an engine has claimed (and, in these tests, nothing runs)."""
    job = Job.objects.create(kind=JobKind.CHAT, deployment=ready, user=bob, conversation=conversation,
                             messages=[{"role": "user", "content": "Hello"}], params=BRIEF.as_dict())
    return queueing.claim(job.pk)


@pytest.fixture
def engine_child(ready, monkeypatch):
    """This process as the deployment's engine child, with nothing loaded yet."""
    as_engine_child(ready, monkeypatch)


def another_ready(ready) -> Deployment:
    return Deployment.objects.create(model=ready.model, ctx=ready.ctx, plan=ready.plan, status=DeploymentStatus.READY)


def test_a_job_whose_chat_template_refuses_its_messages_fails_saying_so(strict_cluster, bob):
    conversation = Conversation.objects.create(user=bob, deployment=strict_cluster, system_prompt="Be brief.")
    job = conversations.ask(conversation, "Hello", BRIEF, strict_cluster)
    done = listen(job, bob)[-1]
    assert done["status"] == JobStatus.FAILED, done
    assert done["error"] == "The model's chat template refused these messages: System role not supported"
    conversation.system_prompt = ""
    conversation.save()
    again = conversations.ask(conversation, "Hello", BRIEF, strict_cluster)
    assert listen(again, bob)[-1]["status"] == JobStatus.SUCCEEDED


def test_a_job_fails_saying_so_when_redis_is_unreachable_as_it_starts(conversation, ready, engine_child,
                                                                      transactional_db, settings, tmp_path):
    job = conversations.ask(conversation, "Hello", BRIEF, ready)  # no engine takes its message: this test runs it
    gone = RedisServer.start(tmp_path / "redis")
    gone.stop()
    settings.REDIS_URL = gone.url  # the job's stream; the channel layer keeps the test run's Redis
    layer = get_channel_layer()
    listener = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(stream.group(job.pk), listener)

    loop.run(job.pk)
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED and job.finished
    assert job.error.startswith("The panel's Redis, which carries answers to you, did not answer"), job.error
    told = async_to_sync(asyncio.wait_for)(layer.receive(listener), 10)["payload"]
    assert told["event"] == "done" and told["status"] == JobStatus.FAILED, "listeners hear the end"
    assert conversations.ask(conversation, "Hello again", BRIEF, ready).status == JobStatus.QUEUED


def test_a_stop_ends_a_running_job_whose_deployment_is_gone(claimed, conversation, ready):
    ready.set_status(DeploymentStatus.STOPPED, "Stopped by alice.")  # its engine went with it
    ending.cancel(claimed)
    claimed.refresh_from_db()
    assert claimed.status == JobStatus.CANCELLED
    assert claimed.error == "Stopped. No engine runs it any more: its deployment is stopped."
    other = another_ready(ready)
    assert conversations.ask(conversation, "Hello again", BRIEF, other).status == JobStatus.QUEUED


def test_a_stop_ends_a_running_job_whose_engine_never_confirms(cancels_forgotten, claimed, conversation, ready,
                                                                transactional_db, celery_worker, monkeypatch):
    monkeypatch.setattr(ending, "STOP_CONFIRM_S", 1)  # the check is sent from here, to the ordinary worker
    heard = streamed(claimed, "Dear", " [", "Neighbor", "'s")
    ending.cancel(claimed)
    assert Job.objects.get(pk=claimed.pk).status == JobStatus.RUNNING, "its engine may still stop it"
    wait_until(lambda: Job.objects.get(pk=claimed.pk).is_finished, 30, "the stop to be settled")
    claimed.refresh_from_db()
    assert claimed.status == JobStatus.CANCELLED and "had not ended it" in claimed.error, claimed.error
    assert claimed.output == heard, "the row keeps what its client was told"
    assert conversations.ask(conversation, "Hello again", BRIEF, ready).status == JobStatus.QUEUED


def test_a_job_its_dead_engine_left_waiting_keeps_what_was_told_when_cancelled(claimed, transactional_db):
    """The chaos soak's splice: an engine killed mid-answer, its job waiting for a retry, its client hanging up
    then. The row said '' while the client had been told the first words."""
    earlier = streamed(claimed, "Once", " upon")
    claimed.attempts += 1  # a second attempt, heard as far as this
    heard = streamed(claimed, "Dear", " [", "Neighbor")
    assert earlier != heard
    ending.requeue(claimed)
    ending.cancel(Job.objects.get(pk=claimed.pk))
    claimed.refresh_from_db()
    assert claimed.status == JobStatus.CANCELLED
    assert claimed.output == heard, "the latest attempt's words, as its client heard them"


def test_a_job_cancelled_as_its_engine_died_is_not_run_again(cancels_forgotten, claimed, transactional_db):
    """The chaos soak's splice, fresh75: a client hung up while its answer ran, and the engine's worker was killed
    before it stopped the job. The job ran again for nobody, and kept its new attempt's first word ('Once')
    where its client had been told 'One day, a cat'."""
    heard = streamed(claimed, "One", " day", ",", " a", " cat")
    ending.cancel(claimed, heard)
    assert Job.objects.get(pk=claimed.pk).status == JobStatus.RUNNING, "its engine is asked to stop it"
    leftovers.run_again([Job.objects.get(pk=claimed.pk)])  # the engine's worker died meanwhile
    claimed.refresh_from_db()
    assert claimed.status == JobStatus.CANCELLED, "not waiting to run again"
    assert claimed.output == heard and claimed.finish_reason == "cancelled"
    assert not ending.cancel_asked(another_job(claimed).pk), "another job is not taken for cancelled"


def another_job(job: Job) -> Job:
    return Job.objects.create(kind=job.kind, deployment=job.deployment, user=job.user, messages=job.messages,
                              params=job.params)


def test_a_worker_that_starts_fails_the_jobs_left_on_a_gone_deployment(claimed, ready, bob, transactional_db,
                                                                        tmp_path):
    waiting = Job.objects.create(kind=JobKind.CHAT, deployment=ready, user=bob, params=BRIEF.as_dict(),
                                 messages=[{"role": "user", "content": "Hi"}])
    ready.set_status(DeploymentStatus.FAILED, "The engine could not load the model.")
    degraded = another_ready(ready)
    degraded.set_status(DeploymentStatus.DEGRADED, "test-2 failed. Re-planning on the laptops that are left.")
    recovering = Job.objects.create(kind=JobKind.CHAT, deployment=degraded, user=bob, status=JobStatus.RUNNING,
                                    started=timezone.now(), attempts=1, params=BRIEF.as_dict())

    worker = start_worker(tmp_path / "worker.log")
    try:
        claimed.refresh_from_db()
        waiting.refresh_from_db()
        assert claimed.status == JobStatus.FAILED
        assert claimed.error == "Its deployment failed while it ran. The engine could not load the model."
        assert waiting.status == JobStatus.FAILED
        assert waiting.error == "Its deployment failed before it ran. The engine could not load the model."
        assert Job.objects.get(pk=recovering.pk).status == JobStatus.RUNNING, "recovery settles that one"
    finally:
        stop(worker)
