"""The OpenAI-compatible API on a real deployment over simulated laptops, through the real daphne server:
a streamed chat equals the whole answer, usage counts are llama.cpp's, embeddings are its mean pooling, the
`openai` client fills a nested model and gets a named tool's call, a client
that hangs up cancels its job, a prompt longer than the context is a 400 naming the numbers, and a request whose
laptop dies under it gets the retried answer."""

import json
import re
import threading

import openai
import pytest
import requests

from clusterpanel.accounts.models import ApiToken
from jobs.models import Job, JobStatus
from jobs.queue.stream import kept
from models_app.llamacpp import oneshot
from nodes.remote import ssh
from tests.conftest import wait_until
from tests.jobs.api.conftest import cosine
from tests.jobs.api.test_structured_outputs import Person
from tests.jobs.api.test_tool_calls import WEATHER

QUESTION = "Name three colours and say one thing about each."
GREEDY = {"temperature": 0, "seed": 7, "top_p": 1.0, "top_k": 40}


@pytest.fixture
def auth(bob) -> dict:
    return {"Authorization": f"Bearer {ApiToken.issue(bob, 'tests')[1]}"}


def sse_chunks(response: requests.Response) -> list:
    """Each `data:` payload of a Server-Sent Events response, parsed, with "[DONE]" kept as it is; comments
    (where a waiting job stands) left out."""
    lines = [line for line in response.iter_lines(decode_unicode=True) if line and not line.startswith(":")]
    assert all(line.startswith("data: ") for line in lines), lines
    return [line[6:] if line == "data: [DONE]" else json.loads(line[6:]) for line in lines]


def test_a_streamed_chat_equals_the_whole_answer_usage_is_counted_and_a_hang_up_cancels(
        cluster, web_server, auth, llama_cpp_mean):
    body = {"model": cluster.model.name, "messages": [{"role": "user", "content": QUESTION}], "max_tokens": 24,
            **GREEDY}
    with requests.post(f"{web_server}/v1/chat/completions", json={**body, "stream": True,
                       "stream_options": {"include_usage": True}}, headers=auth, stream=True, timeout=120) as streamed:
        assert streamed.status_code == 200 and streamed.headers["Content-Type"].startswith("text/event-stream")
        chunks = sse_chunks(streamed)
    assert chunks[-1] == "[DONE]" and chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    pieces = [c["choices"][0]["delta"].get("content") for c in chunks[1:-1] if c["choices"]]
    assert len([p for p in pieces if p]) > 5, "several chunks, token by token"
    assert chunks[-3]["choices"][0]["finish_reason"] == "length" and chunks[-2]["usage"]["completion_tokens"] == 24

    whole = requests.post(f"{web_server}/v1/chat/completions", json=body, headers=auth, timeout=120)
    assert whole.status_code == 200, whole.text
    answer = whole.json()
    assert answer["object"] == "chat.completion" and answer["model"] == cluster.model.name
    assert "".join(p for p in pieces if p) == answer["choices"][0]["message"]["content"]
    assert answer["usage"]["completion_tokens"] == 24 and answer["choices"][0]["finish_reason"] == "length"
    assert answer["usage"]["total_tokens"] == answer["usage"]["prompt_tokens"] + 24
    streamed_usage, whole_usage = chunks[-2]["usage"], answer["usage"]
    assert streamed_usage["prompt_tokens_details"] == {"cached_tokens": 0}
    assert 0 < whole_usage.pop("prompt_tokens_details")["cached_tokens"] < answer["usage"]["prompt_tokens"], \
        "the same greedy request again reused the template's preamble it read, and answered the same"
    streamed_usage.pop("prompt_tokens_details")
    assert whole_usage == streamed_usage

    prompt = "The capital of France is"
    text = requests.post(f"{web_server}/v1/completions", headers=auth, timeout=120, json={
        "model": f"deployment-{cluster.pk}", "prompt": prompt, "max_tokens": 12, **GREEDY}).json()
    reference = oneshot.complete([], prompt, 12, ctx=cluster.ctx)
    assert text["object"] == "text_completion" and text["choices"][0]["text"] == reference["text"]
    assert text["usage"] == {"prompt_tokens": reference["prompt_tokens"],
                             "completion_tokens": reference["completion_tokens"],
                             "total_tokens": reference["prompt_tokens"] + reference["completion_tokens"],
                             "prompt_tokens_details": {"cached_tokens": 0}}

    texts = [QUESTION, prompt]  # embeddings over the laptops: llama.cpp's own mean pooling on the head alone
    found = requests.post(f"{web_server}/v1/embeddings", headers=auth, timeout=120, json={
        "model": cluster.model.name, "input": texts, "encoding_format": "float"}).json()
    assert [item["index"] for item in found["data"]] == [0, 1], found
    for text, item in zip(texts, found["data"], strict=True):
        assert cosine(item["embedding"], llama_cpp_mean(text)) > 0.999, text

    # The official client over the laptops: a nested pydantic model filled, and a named tool's call.
    client = openai.OpenAI(base_url=f"{web_server}/v1", api_key=auth["Authorization"].split()[1], max_retries=0)
    person = client.chat.completions.parse(model=cluster.model.name, response_format=Person, max_tokens=200,
                                           temperature=0, messages=[{"role": "user", "content": "Describe a person."}])
    assert isinstance(person.choices[0].message.parsed, Person)
    called = client.chat.completions.create(
        model=cluster.model.name, max_tokens=100, temperature=0, messages=[{"role": "user", "content": "Weather?"}],
        tools=[WEATHER], tool_choice={"type": "function", "function": {"name": "get_weather"}})
    call = called.choices[0].message.tool_calls[0]
    assert call.function.name == "get_weather" and isinstance(json.loads(call.function.arguments)["city"], str)

    # On the same deployment: a client that hangs up cancels its job; a prompt longer than the context is a 400.
    body = {"messages": [{"role": "user", "content": QUESTION}], "max_tokens": 1000, "stream": True, **GREEDY}
    response = requests.post(f"{web_server}/v1/chat/completions", json=body, headers=auth, stream=True, timeout=120)
    assert response.status_code == 200, response.text
    lines = response.iter_lines(decode_unicode=True)
    received = [json.loads(line[6:]) for line in (next(lines) for _ in range(12)) if line.startswith("data: ")]
    job_id = int(received[0]["id"].removeprefix("chatcmpl-"))
    response.close()
    wait_until(lambda: Job.objects.get(pk=job_id).is_finished, 30, "the job to end once its client left")
    job = Job.objects.get(pk=job_id)
    assert job.status == JobStatus.CANCELLED and job.completion_tokens < 200

    long = {"prompt": "word " * 1500, "max_tokens": 8}
    for stream in (False, True):
        refused = requests.post(f"{web_server}/v1/completions", json={**long, "stream": stream}, headers=auth,
                                timeout=120)
        assert refused.status_code == 400, refused.text
        error = refused.json()["error"]
        assert error["code"] == "context_length_exceeded" and error["param"] == "prompt"
        numbers = [int(n) for n in re.findall(r"\d+", error["message"])]
        assert 1024 in numbers and any(n > 1500 for n in numbers), error["message"]


def test_a_request_whose_laptop_dies_under_it_gets_the_retried_answer(cluster, web_server, celery_worker, auth, bob):
    # A long story, 120 tokens: the kill lands a few tokens in, and the retry runs no longer than it must.
    body = {"model": cluster.model.name, "max_tokens": 120, **GREEDY,
            "messages": [{"role": "user", "content": "Write a long story about a laptop."}]}
    answer = {}
    request = threading.Thread(target=lambda: answer.update(response=requests.post(
        f"{web_server}/v1/chat/completions", json=body, headers=auth, timeout=300)))
    request.start()

    def generating() -> Job | None:
        assert "response" not in answer, f"answered before the kill: {answer['response'].text}"
        job = Job.objects.filter(user=bob).order_by("-pk").first()
        return job if job and len(kept(job.pk)) > 5 else None

    first = wait_until(generating, 60, "generation under way")
    victim = cluster.stages.select_related("node", "server").get(position=1)
    ssh.run(victim.node.ssh_target(), ["kill", "-9", str(victim.server.pid)])
    request.join(300)

    first.refresh_from_db()
    assert first.status == JobStatus.FAILED and victim.node.name in first.error
    retry = Job.objects.get(retry_of=first)
    response = answer["response"]
    assert response.status_code == 200, response.text
    assert response.json()["id"] == f"chatcmpl-{retry.pk}"
    assert response.json()["choices"][0]["message"]["content"] == retry.output != ""
