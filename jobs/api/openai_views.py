"""The OpenAI-compatible API under /v1/: models, chat completions and completions, streamed or whole.

Each request is one job, queued like any other. A streamed response waits for the
job's first token (or its end) before it answers, so a prompt too long for the
context is a plain 400 even when streaming, unless the job has to wait (behind
others, or for its model): then the stream begins at once with an SSE comment
saying where the job stands, and another every STREAM_KEEPALIVE_S until the first
token, so no client or proxy gives up on a quiet connection. A whole answer is waited
for. A client that goes away takes its job with it. A job that a laptop's death
failed before anything was sent is followed to its retry, so the client gets the
retried answer rather than the failure; a stream that had sent part of the answer
follows the retry too and sends what the client does not have, when the retry
says the same again (`Caught`). A model's name goes to its replica that answers
soonest (jobs/queue/routing.py). A request over one of its sender's limits
(jobs/queue/admission.py) is OpenAI's 429, before anything is queued.
"""

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt

from clusterpanel.accounts import apiauth
from jobs.api import embeddings, inputs, openai_api
from jobs.api.caught import PARTED, Caught, CaughtCalls, sent_call, text_parted
from jobs.api.inputs import InputError
from jobs.api.openai_api import Request, Shapes
from jobs.api.openai_models import model_list
from jobs.api.openai_submit import REDIS_LOST, submit
from jobs.engine import recovery
from jobs.models import Job, JobKind, JobStatus
from jobs.queue import admission, ending, stream
from jobs.queue.listen import QUIET, REDIS_DOWN, JobEvents, Next, StreamLost
from jobs.queue.standing import standing, standing_now

log = logging.getLogger(__name__)
FOLLOW_RETRY_S = 600  # how long a request waits for the re-plan and retry after a laptop died under its job
# Before its first token a streamed job is asked every DECIDE_S whether it waits; while it waits, its stream
# says so every settings.STREAM_KEEPALIVE_S (a client's 60 s read timeout once gave up on a request queued
# behind two long answers).
DECIDE_S = 0.5
ANSWERING = ("token", "tool_call")  # the events that begin an answer: a streamed one is under way from either
UNTAKEN_S = 10.0  # a job next in line that its engine has not taken by then gets the stream's comments too


def failed(status: int, message: str, param: str | None = None, code: str | None = None,
           kind: str | None = None) -> JsonResponse:
    return JsonResponse(openai_api.error(message, param, code, kind or openai_api.kind_of(status)), status=status)


def refused(exc: apiauth.Unauthorized) -> JsonResponse:
    """401 for a key that is not one (or no longer is), 403 for a key that may not do this (read-only)."""
    if exc.status == 403:
        return failed(403, str(exc), code="permission_denied", kind="permission_error")
    return failed(401, str(exc), code="invalid_api_key")


@login_not_required
@csrf_exempt
def no_such_path(request: HttpRequest, rest: str = "") -> JsonResponse:
    """Any path under /v1/ that names no operation: OpenAI's 404 for an unknown URL (Django's is a page)."""
    hint = f" Paths under /v1/ end without a slash: {request.path.rstrip('/')}?" if rest.endswith("/") else ""
    return failed(404, f"Invalid URL ({request.method} {request.path}): the panel's OpenAI-compatible API has "
                       "models, chat/completions, completions, embeddings, responses, files, batches and "
                       f"(Anthropic's) messages (docs/api.md).{hint}")


def caller(request: HttpRequest):
    return apiauth.authenticate(request, session=False)  # the OpenAI API is for keys, as OpenAI's is


@login_not_required
@csrf_exempt
async def models(request: HttpRequest) -> HttpResponse:
    try:
        await sync_to_async(caller)(request)
    except apiauth.Unauthorized as exc:
        return refused(exc)
    if request.method != "GET":
        return failed(405, "Use GET.")
    listed = await sync_to_async(model_list)()
    return JsonResponse({"object": "list", "data": listed})


@login_not_required
@csrf_exempt
async def chat_completions(request: HttpRequest) -> HttpResponse:
    return await create(request, JobKind.CHAT)


@login_not_required
@csrf_exempt
async def completions(request: HttpRequest) -> HttpResponse:
    return await create(request, JobKind.COMPLETION)


@login_not_required
@csrf_exempt
async def embeddings_view(request: HttpRequest) -> HttpResponse:
    return await create(request, JobKind.EMBEDDING)


async def create(request: HttpRequest, kind: str) -> HttpResponse:
    try:
        user = await sync_to_async(caller)(request)
        if request.method != "POST":
            return failed(405, "Use POST.")
        reading = embeddings.parse if kind == JobKind.EMBEDDING else openai_api.parse
        wanted = reading(inputs.json_body(request), kind)
        job, model = await sync_to_async(submit)(user, request.api_token, wanted)
    except apiauth.Unauthorized as exc:
        return refused(exc)
    except InputError as exc:
        return failed(exc.status, str(exc), exc.param, exc.code)
    except admission.OverLimit as exc:
        return over_limit(exc)
    try:
        return await Answer(job, wanted, model).respond()
    except (StreamLost, *REDIS_DOWN) as exc:
        log.warning("job %s: answered 503: %s", job.pk, exc)
        return failed(503, f"{REDIS_LOST} ({exc}). Try again in a moment.", code="service_unavailable")


def over_limit(exc: admission.OverLimit) -> JsonResponse:
    """OpenAI's 429: its error type says which kind of limit ("requests" or "tokens"), Retry-After when to
    come again (OpenAI's own clients wait that long before they retry)."""
    answer = failed(429, str(exc), code="rate_limit_exceeded", kind=exc.kind)
    answer["Retry-After"] = str(exc.retry_after)
    return answer


def cancel_unfinished(job_id: int, told: str = "") -> None:
    """The job of a client that went away, cancelled; `told`: the text its stream had sent it. A job a laptop's
    death failed is cancelled in its retry, or asked not to be retried while its retry may still come (the
    client left while its stream waited for it): otherwise the retry would answer nobody, and keep other words."""
    job = Job.objects.get(pk=job_id)
    while job.status == JobStatus.FAILED and (again := Job.objects.filter(retry_of=job).first()) is not None:
        job = again
    try:
        if not job.is_finished:
            ending.cancel(job, told)
        elif recovery.retry_state(job.pk)[0]:
            stream.ask_to_cancel(job.pk, ending.cancel_key(job.pk))
    except REDIS_DOWN as exc:  # the engine cannot be told: it finishes the job, which nobody reads
        log.warning("could not cancel job %s: %s", job_id, exc)


class Answer:
    """One request's response, from the job's events."""

    def __init__(self, job: Job, wanted: Request, model: str) -> None:
        self.job, self.wanted, self.model = job, wanted, model
        self.shapes = Shapes(job.pk, int(job.created.timestamp()), model, wanted.kind)
        self.listener, self.events, self.next = JobEvents(job.pk), None, None
        self.head: list[dict] = []  # events read before answering: up to the first token, or all of them
        self.sent: list[str] = []  # the text the client has been sent, streamed

    async def respond(self) -> HttpResponse:
        handed_on = False
        try:
            await self.listen()
            waits = await self.first_or_waiting() if self.wanted.stream else await self.read_until(lambda e: False)
            if waits:
                handed_on = True
                return self.streaming(waits)
            done = self.done()
            if done and done.get("status") == JobStatus.FAILED:
                again = await self.retried()
                if again is not None:
                    await self.end(cancel=False)
                    handed_on = True
                    retry = await sync_to_async(Job.objects.get)(pk=again)
                    return await Answer(retry, self.wanted, self.model).respond()
                done = await sync_to_async(lambda: Job.objects.get(pk=self.job.pk).summary())()
                status, body = openai_api.failure(done, self.wanted)
                return JsonResponse(body, status=status)
            if self.wanted.kind == JobKind.EMBEDDING:
                return JsonResponse(await sync_to_async(embeddings.answer)(self.job.pk, self.wanted, self.model))
            if not self.wanted.stream:
                return JsonResponse(self.shapes.whole(done))
            handed_on = True
            return self.streaming(None)
        finally:
            if not handed_on:
                await self.end()

    async def retried(self) -> int | None:
        """The retry of a job a laptop's death failed, once recovery submits it; None if none is coming."""
        deadline = time.monotonic() + FOLLOW_RETRY_S
        while time.monotonic() < deadline:
            waiting, again = await sync_to_async(recovery.retry_state)(self.job.pk)
            if not waiting:
                return again
            try:
                await self.listener.live()  # wakes on the retry (or not-retried) event, or after a quiet spell
            except REDIS_DOWN:
                await self.listener.listen_again()
        return None

    def streaming(self, waits: str | None) -> StreamingHttpResponse:
        return StreamingHttpResponse(self.sse(waits), content_type="text/event-stream",
                                     headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    async def listen(self) -> None:
        await self.listener.open()
        self.events = self.listener.events()
        self.next = Next(self.events)

    async def read_until(self, enough, within: float | None = None, by: float | None = None) -> bool:
        """Events into `head` until the end or `enough`; False when they ended, True when `within` seconds
        passed without one first, or the clock (time.monotonic) passed `by`."""
        while True:
            try:
                event = await self.next.get(within if by is None else max(by - time.monotonic(), 0))
            except StopAsyncIteration:
                return False
            if event is QUIET:
                return True
            self.head.append(event)
            if event["event"] == "done" or enough(event):
                return False

    async def first_or_waiting(self) -> str | None:
        """Where the job stands, as soon as it is seen waiting; else None once its first token or its end is in
        `head`. Between looks at the database it waits on the job's own events (`Next` keeps a wait that timed
        out for the next call, so none is left behind): the engine's word that it took the job ends the wait at
        once, where a sleep between looks once cost a person up to DECIDE_S before the first token."""
        deadline = time.monotonic() + UNTAKEN_S
        while True:
            waits, queued = await sync_to_async(standing_now)(self.job.pk)
            if waits:
                return waits
            if not queued:
                break
            if time.monotonic() > deadline:  # next in line, yet its engine has not taken it: say so meanwhile
                return f"queued, next in line on deployment #{self.job.deployment_id}; its engine has not taken it yet"
            if not await self.read_until(taken_or_answering, by=time.monotonic() + DECIDE_S):
                break  # taken, answering or ended
        if not self.done() and not (self.head and self.head[-1]["event"] in ANSWERING):
            await self.read_until(lambda event: event["event"] in ANSWERING)
        return None

    async def keep_alive(self, waits: str) -> AsyncIterator[str]:
        """SSE comments (which clients ignore) saying where the job stands, one every STREAM_KEEPALIVE_S however
        many other events come meanwhile (a busy queue tells each waiting job its new place after every step),
        until its first token or its end."""
        yield comment(waits)
        due = time.monotonic() + settings.STREAM_KEEPALIVE_S
        while True:
            try:
                event = await self.next.get(max(due - time.monotonic(), 0))
            except StopAsyncIteration:
                return
            if event is QUIET:
                yield comment(await sync_to_async(standing)(self.job.pk) or "starting")
                due = time.monotonic() + settings.STREAM_KEEPALIVE_S
                continue
            if event["event"] != "queue":  # places are said in the comments; the rest is replayed in order
                self.head.append(event)
            if event["event"] in (*ANSWERING, "done"):
                return

    def done(self) -> dict | None:
        return self.head[-1] if self.head and self.head[-1]["event"] == "done" else None

    async def end(self, cancel: bool = True) -> None:
        """Let go of the job's group; a job nobody waits for any more is cancelled. Not when the answer is handed
        to the job's retry (`cancel=False`): the client still waits, for the retry."""
        if self.next is not None:
            await self.next.close()
        if self.events is not None:
            await self.events.aclose()
        await self.listener.close()
        if cancel:
            await sync_to_async(cancel_unfinished)(self.job.pk, "".join(self.sent))

    async def sse(self, waits: str | None) -> AsyncIterator[str]:
        sent, calls, entries = self.sent, {}, []  # the text and tool calls (by index) sent; logprobs not yet sent
        try:
            if waits:
                async for line in self.keep_alive(waits):
                    yield line
            if self.shapes.chat:
                yield data(self.shapes.chunk(role=True))
            while True:
                caught, caught_calls = Caught("".join(sent)), CaughtCalls(calls)
                events, event = self.all_events(), {}
                async for event in events:
                    if event["event"] == "token":
                        text = caught.new(event["text"])
                        if text is None:
                            break
                        if text:
                            sent.append(text)
                            yield data(self.shapes.chunk(text, entries=entries))
                            entries = []
                        elif caught.behind:  # a token the client has: its logprobs went with it the first time
                            entries = []
                    elif event["event"] == "logprob":
                        entries.append({key: event[key] for key in ("token", "logprob", "bytes", "top_logprobs")})
                    elif event["event"] == "tool_call" and self.shapes.chat:
                        delta = caught_calls.new(event)
                        if delta is None:
                            break
                        if delta:
                            sent_call(calls, delta)
                            yield data(self.shapes.call_chunk(delta))
                    elif event["event"] == "restart":  # run again from its start: held against what was sent
                        caught, caught_calls = Caught("".join(sent)), CaughtCalls(calls)
                    elif event["event"] == "done":
                        break
                await events.aclose()
                if event.get("event") == "done" and event.get("status") == JobStatus.FAILED:
                    followed = []
                    async for line in self.follow(followed):
                        yield line
                    if followed[-1]:
                        continue  # the retry's events, from where the client's text ends
                if text_parted(event, caught, caught_calls):
                    await sync_to_async(ending.part)(self.job.pk, "".join(sent), PARTED)
                    yield data(openai_api.error(PARTED, None, "retry_differs", "server_error"))
                    yield "data: [DONE]\n\n"
                    return
                for line in self.closing(event, "".join(sent), calls, entries):
                    yield line
                return
        except (StreamLost, *REDIS_DOWN) as exc:  # the client hears why the stream ends, not a cut connection
            log.warning("job %s: stream ended: %s", self.job.pk, exc)
            yield data(openai_api.error(f"{REDIS_LOST} ({exc}); the answer stops here.", None,
                                        "service_unavailable", "server_error"))
            yield "data: [DONE]\n\n"
        except Exception as exc:  # once the stream has begun no 500 can be sent: an end the client hears, not a
            log.exception("job %s: stream failed", self.job.pk)  # connection left open with nothing more to come
            yield data(openai_api.error(f"The panel could not go on with this answer ({type(exc).__name__}: {exc}); "
                                        "the answer stops here.", None, "server_error", "server_error"))
            yield "data: [DONE]\n\n"
        finally:
            await self.end()

    async def follow(self, followed: list[bool]) -> AsyncIterator[str]:
        """After a failure mid-answer: listen to its retry instead, once recovery queues one (on another replica
        of the model, for a request routed by model), saying meanwhile that it waits, until the retry's first
        token; `followed` gets False when no retry comes."""
        waiting = asyncio.ensure_future(self.retried())
        try:
            while not (await asyncio.wait({waiting}, timeout=settings.STREAM_KEEPALIVE_S))[0]:
                yield comment("a laptop failed under this answer: waiting for its retry")
        finally:
            if not waiting.done():  # the client went away meanwhile
                waiting.cancel()
        again = waiting.result()
        followed.append(again is not None)
        if again is None:
            return
        await self.end(cancel=False)
        self.job = await sync_to_async(Job.objects.get)(pk=again)
        self.listener, self.head = JobEvents(again), []
        self.events = self.next = None
        await self.listen()
        async for line in self.keep_alive(f"retried as job {again}"):
            yield line

    async def all_events(self) -> AsyncIterator[dict]:
        head, self.head = self.head, []
        for event in head:
            yield event
        if head and head[-1]["event"] == "done":
            return
        while True:
            try:
                yield await self.next.get(None)
            except StopAsyncIteration:
                return

    def closing(self, done: dict, sent: str, calls: dict | None = None, entries: list[dict] = ()) -> list[str]:
        if done.get("status") == JobStatus.FAILED:
            return [data(openai_api.failure(done, self.wanted)[1]), "data: [DONE]\n\n"]
        output = done.get("output") or ""
        rest = output[len(sent):] if output.startswith(sent) else ""  # tokens an hour-old replay no longer holds
        lines = [data(self.shapes.chunk(rest, entries=list(entries)))] if rest or entries else []
        for index, call in enumerate((done.get("tool_calls") or []) if self.shapes.chat else []):
            have, arguments = (calls or {}).get(index), call["function"]["arguments"]
            if have is None:  # a call the stream did not carry, whole
                lines.append(data(self.shapes.call_chunk({"index": index, "id": call["id"], **call["function"]})))
            elif arguments.startswith(have["arguments"]) and arguments != have["arguments"]:  # its rest
                lines.append(data(self.shapes.call_chunk({"index": index,
                                                          "arguments": arguments[len(have["arguments"]):]})))
        lines.append(data(self.shapes.chunk(None if self.shapes.chat else "", openai_api.finish_reason(done))))
        if self.wanted.include_usage:
            lines.append(data(self.shapes.usage_chunk(done)))
        return [*lines, "data: [DONE]\n\n"]


def taken_or_answering(event: dict) -> bool:
    return event["event"] in ANSWERING or (event["event"] == "status" and event.get("status") == JobStatus.RUNNING)


def comment(text: str) -> str:
    return f": {' '.join(text.split())}\n\n"


def data(body: dict) -> str:
    return f"data: {json.dumps(body)}\n\n"


