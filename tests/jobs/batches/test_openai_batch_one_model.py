"""A batch runs on one model, as OpenAI's do: through the `openai` client, a line naming another model than the
batch's (its first request's) is refused with `model_not_found` in the batch's errors and its error file, and
runs nowhere; a first line naming a model nobody deployed is refused with the code /v1/chat/completions gives."""

import json

import openai
import pytest

from clusterpanel.accounts.models import ApiToken
from jobs.models import Job
from tests.jobs.standins import ready_deployment


@pytest.fixture
def client(ready, web_server, bob) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{web_server}/v1", api_key=ApiToken.issue(bob, "client")[1], max_retries=0)


def batch_file(*models) -> tuple[str, bytes]:
    lines = [{"custom_id": f"q{n}", "method": "POST", "url": "/v1/chat/completions",
              "body": {"messages": [{"role": "user", "content": "Hi"}], **({"model": m} if m else {})}}
             for n, m in enumerate(models, start=1)]
    return "questions.jsonl", "".join(json.dumps(line) + "\n" for line in lines).encode()


def test_a_line_naming_another_model_is_refused_and_runs_nowhere(client, ready):
    other = ready_deployment()  # ready too: the line could run there, but not in this batch
    source = client.files.create(file=batch_file("tiny", "standin", f"deployment-{ready.pk}", None, "gpt-4o"),
                                 purpose="batch")
    batch = client.batches.create(input_file_id=source.id, endpoint="/v1/chat/completions", completion_window="24h")
    assert batch.model == "tiny" and batch.request_counts.total == 5
    refused = {error.line: error for error in batch.errors.data}
    assert set(refused) == {2, 5} and {error.code for error in refused.values()} == {"model_not_found"}
    assert "'standin' is not tiny, the model this batch runs on" in refused[2].message
    assert sorted(Job.objects.values_list("line", flat=True)) == [1, 3, 4]
    assert not Job.objects.filter(deployment=other).exists()

    ended = client.batches.cancel(batch.id)
    errors = [json.loads(line) for line in client.files.content(ended.error_file_id).text.splitlines()]
    codes = {line["custom_id"]: line["response"]["body"]["error"]["code"] for line in errors if line["response"]}
    assert codes == {"q2": "model_not_found", "q5": "model_not_found"}


def test_an_unknown_model_on_line_one_has_the_code_chat_completions_gives(client):
    source = client.files.create(file=batch_file("gpt-4o", "tiny"), purpose="batch")
    with pytest.raises(openai.NotFoundError) as by_batch:
        client.batches.create(input_file_id=source.id, endpoint="/v1/chat/completions", completion_window="24h")
    with pytest.raises(openai.NotFoundError) as by_chat:
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "Hi"}])
    assert by_batch.value.code == by_chat.value.code == "model_not_found"
    assert by_batch.value.body["param"] == by_chat.value.body["param"] == "model"
    assert not Job.objects.exists()
