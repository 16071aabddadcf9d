"""The official `openai` client, unchanged, runs a batch through /v1/files and /v1/batches on the real web server:
upload, create, retrieve, list, the output and error files — for chat lines and for /v1/completions lines.
The batch is the Batches page's (one system, two doors), and a batch uploaded on the page is the client's
to list. Another person's files and batches are not found; bad requests get OpenAI's errors."""

import json

import openai
import pytest

from clusterpanel.accounts.models import ApiToken, Role, User
from jobs.engine import loop
from jobs.models import ApiFile, Batch, Job
from tests.jobs.conftest import engine_child_here, head_deployment

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def on_the_head(transactional_db, monkeypatch):
    deployment = head_deployment(slots=2)
    with engine_child_here(deployment, monkeypatch):
        yield deployment


def client_for(web_server: str, user) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{web_server}/v1", api_key=ApiToken.issue(user, "client")[1], max_retries=0)


def lines(url: str, *bodies: dict) -> bytes:
    return "".join(json.dumps({"custom_id": f"q{n}", "method": "POST", "url": url, "body": body}) + "\n"
                   for n, body in enumerate(bodies, start=1)).encode()


def run_waiting(batch_id: str) -> None:
    loop.run(Job.objects.filter(batch_id=int(batch_id.removeprefix("batch_"))).earliest("pk").pk)


def test_the_openai_client_runs_a_chat_batch_and_reads_its_files(on_the_head, web_server, bob):
    client = client_for(web_server, bob)
    ask = {"messages": [{"role": "user", "content": "Name a colour."}], "max_tokens": 8, "temperature": 0}
    data = lines("/v1/chat/completions", ask, ask) + b'{"custom_id": "bad", "method": "GET"}\n'
    uploaded = client.files.create(file=("questions.jsonl", data), purpose="batch")
    assert uploaded.bytes == len(data) and uploaded.purpose == "batch" and uploaded.id.startswith("file-")

    batch = client.batches.create(input_file_id=uploaded.id, endpoint="/v1/chat/completions",
                                  completion_window="24h", metadata={"run": "nightly"})
    assert batch.status == "in_progress" and batch.request_counts.total == 3 and batch.metadata == {"run": "nightly"}
    assert Batch.objects.get().input_file_id == uploaded.id, "the same batch the Batches page shows"
    run_waiting(batch.id)

    done = client.batches.retrieve(batch.id)
    assert done.status == "completed" and done.request_counts.completed == 2 and done.request_counts.failed == 1, \
        [(job.line, job.status, job.error) for job in Job.objects.all()]
    output = [json.loads(line) for line in client.files.content(done.output_file_id).text.splitlines()]
    assert [line["custom_id"] for line in output] == ["q1", "q2"]
    assert all(line["response"]["status_code"] == 200 and line["response"]["body"]["choices"][0]["message"]["content"]
               for line in output)
    errors = [json.loads(line) for line in client.files.content(done.error_file_id).text.splitlines()]
    assert [line["response"]["status_code"] for line in errors] == [400]
    assert client.files.retrieve(done.output_file_id).purpose == "batch_output"
    assert [b.id for b in client.batches.list()] == [batch.id]
    assert uploaded.id in [f.id for f in client.files.list()]


def test_completions_lines_run_as_text_completions(on_the_head, web_server, bob):
    client = client_for(web_server, bob)
    data = lines("/v1/completions", {"prompt": "Once upon a time", "max_tokens": 6, "temperature": 0})
    source = client.files.create(file=("prompts.jsonl", data), purpose="batch")
    batch = client.batches.create(input_file_id=source.id, endpoint="/v1/completions", completion_window="24h")
    run_waiting(batch.id)
    done = client.batches.retrieve(batch.id)
    answer = json.loads(client.files.content(done.output_file_id).text)["response"]["body"]
    assert answer["object"] == "text_completion" and answer["choices"][0]["text"]
    assert Job.objects.get().prompt == "Once upon a time"

    mixed = client.files.create(file=("mixed.jsonl", data), purpose="batch")
    with pytest.raises(openai.BadRequestError, match="No line of the file can run"):
        client.batches.create(input_file_id=mixed.id, endpoint="/v1/chat/completions", completion_window="24h")


def test_refusals_in_openais_shape_and_nothing_of_anothers(on_the_head, web_server, bob):
    client = client_for(web_server, bob)
    carol = User.objects.create_user("carol", "c@example.org", "pw-long-enough-1", role=Role.USER)
    stranger = client_for(web_server, carol)
    source = client.files.create(file=("q.jsonl", lines("/v1/chat/completions", {
        "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4})), purpose="batch")
    batch = client.batches.create(input_file_id=source.id, endpoint="/v1/chat/completions", completion_window="24h")
    for call in (lambda: stranger.files.retrieve(source.id), lambda: stranger.files.content(source.id),
                 lambda: stranger.batches.retrieve(batch.id), lambda: stranger.batches.cancel(batch.id),
                 lambda: stranger.batches.create(input_file_id=source.id, endpoint="/v1/chat/completions",
                                                 completion_window="24h")):
        with pytest.raises(openai.NotFoundError):
            call()
    with pytest.raises(openai.BadRequestError, match="purpose"):
        client.files.create(file=("x.jsonl", b"{}"), purpose="fine-tune")
    with pytest.raises(openai.BadRequestError, match="completion_window"):
        client.batches.create(input_file_id=source.id, endpoint="/v1/chat/completions", completion_window="1h")
    with pytest.raises(openai.BadRequestError, match="endpoint"):
        client.batches.create(input_file_id=source.id, endpoint="/v1/moderations", completion_window="24h")

    cancelled = client.batches.cancel(batch.id)
    assert cancelled.status == "cancelled" and cancelled.request_counts.failed == 1
    assert client.files.delete(source.id).deleted and not ApiFile.objects.filter(public_id=source.id).exists()
    assert client.batches.retrieve(batch.id).input_file_id == source.id, "the batch remembers where it came from"


def test_one_system_two_doors_the_page_and_the_client_see_each_others_batches(on_the_head, web_server, bob):
    from django.core.files.uploadedfile import SimpleUploadedFile

    from tests.rows import client_for as page_for

    client, page = client_for(web_server, bob), page_for(bob)
    by_client = client.batches.create(input_file_id=client.files.create(file=("a.jsonl", lines(
        "/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}]})), purpose="batch").id,
        endpoint="/v1/chat/completions", completion_window="24h")
    shown = page.get("/jobs/batches/").content.decode()
    assert f'href="/jobs/batches/{by_client.id.removeprefix("batch_")}/"' in shown

    answer = page.post("/jobs/batches/", {"deployment": on_the_head.pk, "file": SimpleUploadedFile(
        "from-page.csv", b"prompt\nHello\n")})
    assert answer.status_code == 302, answer.content
    from_page = Batch.objects.exclude(pk=int(by_client.id.removeprefix("batch_"))).get()
    listed = {b.id: b for b in client.batches.list()}
    assert set(listed) == {by_client.id, f"batch_{from_page.pk}"}
    source = listed[f"batch_{from_page.pk}"].input_file_id
    assert client.files.content(source).text == "prompt\nHello\n", "its input file is the one uploaded"


def test_a_line_with_tools_gives_its_call_in_the_output(on_the_head, web_server, bob):
    client = client_for(web_server, bob)
    weather = {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string", "maxLength": 30}}, "required": ["city"]}}}
    data = lines("/v1/chat/completions", {"messages": [{"role": "user", "content": "Weather in Paris?"}],
                                          "tools": [weather], "tool_choice": {"type": "function",
                                                                              "function": {"name": "get_weather"}},
                                          "parallel_tool_calls": False, "max_tokens": 100, "temperature": 0,
                                          "logprobs": True})
    batch = client.batches.create(input_file_id=client.files.create(file=("t.jsonl", data), purpose="batch").id,
                                  endpoint="/v1/chat/completions", completion_window="24h")
    run_waiting(batch.id)
    answer = json.loads(client.files.content(client.batches.retrieve(batch.id).output_file_id).text)
    choice = answer["response"]["body"]["choices"][0]
    (call,) = choice["message"]["tool_calls"]
    assert choice["finish_reason"] == "tool_calls" and call["function"]["name"] == "get_weather"
    assert isinstance(json.loads(call["function"]["arguments"])["city"], str)
    assert choice["logprobs"]["content"], "the line's logprobs too"
