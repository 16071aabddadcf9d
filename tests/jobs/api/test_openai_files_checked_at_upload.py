"""A file uploaded for a batch through the `openai` client is checked as it arrives, in the words of the format
OpenAI's Batch API takes (JSONL): a note, a picture or an empty file is refused then, keeping nothing, rather
than when a batch is made of it; and a batch made of a file that is not JSONL is never judged as a CSV."""

import json

import openai
import pytest

from clusterpanel.accounts.models import ApiToken
from jobs.batches import files
from jobs.models import ApiFile

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89"
NOTE = b"Remember: ask the lab about the new laptops.\nAnd the projector.\n"


@pytest.fixture
def client(ready, web_server, bob) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{web_server}/v1", api_key=ApiToken.issue(bob, "client")[1], max_retries=0)


@pytest.mark.parametrize("name, data, said", [
    ("note.txt", NOTE, "No line of the file is a request that can run"),
    ("picture.png", PNG, "The file is not text (line 1 is not UTF-8)"),
    ("empty.jsonl", b"", "The file is empty"),
    ("blank.jsonl", b"\n \n", "The file is empty"),
])
def test_a_file_that_is_not_a_batch_input_file_is_refused_as_it_arrives(client, name, data, said):
    with pytest.raises(openai.BadRequestError) as refused:
        client.files.create(file=(name, data), purpose="batch")
    error = refused.value.body
    assert said in error["message"] and "a batch input file is JSONL" in error["message"], error
    assert error["param"] == "file" and "CSV" not in error["message"] and "header" not in error["message"]
    assert not ApiFile.objects.exists(), "nothing is kept"


def test_a_file_with_one_good_line_is_kept_and_its_bad_lines_judged_in_the_batch(client):
    good = {"custom_id": "a", "method": "POST", "url": "/v1/chat/completions",
            "body": {"messages": [{"role": "user", "content": "Hi"}]}}
    kept = client.files.create(file=("q.jsonl", b"not json\n" + json.dumps(good).encode()), purpose="batch")
    batch = client.batches.create(input_file_id=kept.id, endpoint="/v1/chat/completions", completion_window="24h")
    assert batch.request_counts.total == 2 and batch.errors.data[0].line == 1


def test_a_batch_of_a_file_stored_before_the_check_is_judged_as_jsonl(client, bob):
    earlier = files.store(bob, "note.txt", NOTE)  # as the Files API kept any text before
    with pytest.raises(openai.BadRequestError) as refused:
        client.batches.create(input_file_id=earlier.public_id, endpoint="/v1/chat/completions",
                              completion_window="24h")
    message = refused.value.body["message"]
    assert "line 1: Not valid JSON" in message and "header" not in message and "CSV" not in message, message
