"""Reading batch files: each bad line is named with its number and a plain reason, good lines still come
through, and a file nothing can be read from is refused as a whole."""

import json

import pytest

from jobs.batches.batchfile import FileRefused, parse

CHAT = "/v1/chat/completions"


def line(custom_id="a", method="POST", url=CHAT, **body) -> str:
    body.setdefault("messages", [{"role": "user", "content": "Hi"}])
    return json.dumps({"custom_id": custom_id, "method": method, "url": url, "body": body})


def jsonl(*lines: str, limit: int = 100, max_tokens_limit: int | None = 1024):
    return parse("in.jsonl", "\n".join(lines).encode(), limit, max_tokens_limit)


def csv_file(text: str, limit: int = 100):
    return parse("in.csv", text.encode(), limit, 1024)


def reasons(parsed) -> dict[int, str]:
    return {bad["line"]: bad["reason"] for bad in parsed.rejected}


def test_it_reads_an_openai_batch_line_with_its_params():
    parsed = jsonl(line("q1", model="gpt-4o", temperature=0, max_completion_tokens=12, seed=7, stop="\n",
                        messages=[{"role": "developer", "content": "Be short."},
                                  {"role": "user", "content": [{"type": "text", "text": "Hello"}]}]))
    assert parsed.format == "jsonl" and parsed.rejected == []
    request = parsed.requests[0]
    assert (request.line, request.custom_id) == (1, "q1")
    assert request.messages == [{"role": "system", "content": "Be short."}, {"role": "user", "content": "Hello"}]
    assert request.params["max_tokens"] == 12 and request.params["temperature"] == 0.0
    assert request.params["seed"] == 7 and request.params["stop"] == ["\n"]


@pytest.mark.parametrize("bad, reason", [
    ("{not json", "Not valid JSON"),
    ("[1, 2]", "must be a JSON object"),
    ('"just a string"', "must be a JSON object"),
    ("[" * 100_000 + "]" * 100_000, "nested too deep"),
    ('{"custom_id": ' + "9" * 5000 + "}", "a number is too long"),
    (line(custom_id=None), "custom_id is missing"),
    (line(custom_id=""), "custom_id is missing"),
    (line(custom_id=5), "custom_id must be a string"),
    (line(custom_id="x" * 201), "longer than 200"),
    (line(method="GET"), 'method must be "POST"'),
    (line(url="/v1/moderations"), 'url must be "/v1/chat/completions", "/v1/completions" or "/v1/embeddings"'),
    (line(logprobs="yes"), "logprobs must be true or false"),
    (line(top_logprobs=3), "top_logprobs needs logprobs set to true"),
    (json.dumps({"custom_id": "a", "method": "POST", "url": "/v1/embeddings", "body": {"input": ""}}),
     "body.input[0] is empty"),
    (json.dumps({"custom_id": "a", "method": "POST", "url": "/v1/embeddings",
                 "body": {"input": "x", "encoding_format": "base64"}}), "encoding_format must be float"),
    (line(url="/v1/embeddings", input="x"), "body has messages, which an embedding line does not take"),
    (json.dumps({"custom_id": "a", "method": "POST", "url": CHAT}), "body is missing"),
    (json.dumps({"custom_id": "a", "method": "POST", "url": CHAT, "body": {}}), "messages is missing"),
    (line(messages=[]), "messages is missing or empty"),
    (line(messages="Hi"), "messages is missing or empty"),
    (line(messages=["Hi"]), "messages[0] must be an object"),
    (line(messages=[{"role": "robot", "content": "Hi"}]), "role must be system, user or assistant"),
    (line(messages=[{"role": "user", "content": 3}]), "content must be text"),
    (line(messages=[{"role": "user", "content": [{"type": "image_url"}]}]), "content must be text"),
    (line(messages=[{"role": "user", "content": "   "}]), "no user message with text"),
    (line(messages=[{"role": "system", "content": "Only a system prompt"}]), "no user message"),
    (line(temperature=5), "temperature must be between 0.0 and 2.0"),
    (line(max_tokens=0), "max_tokens must be between 1"),
    (line(max_tokens=5000), "max_tokens must be between 1 and 1024"),
    (line(max_tokens="many"), "max_tokens must be a whole number"),
    (line(max_tokens=10, max_completion_tokens=10), "not both"),
    (line(frequency_penalty=0.5), "Unknown parameter: frequency_penalty"),
    (line(n=3), "n must be 1"),
    (line(stream=True), "stream must be false"),
    (line(stop=["a", "b", "c", "d", "e"]), "stop takes up to 4"),
    (json.dumps({"custom_id": "a", "method": "POST", "url": CHAT, "body": {}, "extra": 1}), "Unknown field extra"),
])
def test_it_rejects_a_bad_jsonl_line_with_its_number_and_reason(bad, reason):
    parsed = jsonl(line("good-1"), bad, line("good-2"))
    assert [r.custom_id for r in parsed.requests] == ["good-1", "good-2"]
    assert [r.line for r in parsed.requests] == [1, 3]
    assert list(reasons(parsed)) == [2] and reason in reasons(parsed)[2]


def test_it_names_the_line_a_custom_id_was_first_used_on():
    parsed = jsonl(line("a"), line("b"), line("a"))
    assert reasons(parsed) == {3: "custom_id 'a' is already used on line 1."}
    assert parsed.rejected[0]["custom_id"] == "a"


def test_it_skips_blank_lines_but_keeps_the_file_numbering():
    parsed = jsonl(line("a"), "", "   ", line("b"), "")
    assert [r.line for r in parsed.requests] == [1, 4] and parsed.rejected == []


def test_a_line_that_is_not_utf8_is_rejected_alone():
    data = line("a").encode() + b"\n" + b'{"custom_id": "\xff"}' + b"\n" + line("b").encode()
    parsed = parse("in.jsonl", data, 100, None)
    assert len(parsed.requests) == 2 and reasons(parsed) == {2: "The line is not UTF-8 text."}


def test_it_refuses_a_file_with_more_lines_than_the_limit():
    with pytest.raises(FileRefused, match="3 requests; a batch takes at most 2"):
        jsonl(line("a"), line("b"), line("c"), limit=2)


def test_it_refuses_an_empty_file():
    with pytest.raises(FileRefused, match="empty"):
        parse("in.jsonl", b"\n  \n", 100, None)


def test_it_tells_the_format_by_name_then_by_content():
    assert parse("requests.txt", line("a").encode(), 10, None).format == "jsonl"
    assert parse("requests.txt", b"prompt\nHello\n", 10, None).format == "csv"


def test_it_reads_a_csv_with_system_max_tokens_and_custom_id():
    parsed = csv_file('custom_id,system,prompt,max_tokens\nc1,Be brief.,"Hello, there",16\nc2,,"Two\nlines",\n')
    assert parsed.format == "csv" and parsed.rejected == []
    first, second = parsed.requests
    assert (first.line, first.custom_id, first.params["max_tokens"]) == (2, "c1", 16)
    assert first.messages == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello, there"}]
    assert second.messages == [{"role": "user", "content": "Two\nlines"}] and second.params["max_tokens"] == 256


def test_a_csv_without_custom_ids_gets_them_from_line_numbers():
    parsed = csv_file("\ufeffPrompt,max_tokens\nOne,\n\nTwo,\n,5\n")
    assert [(r.line, r.custom_id) for r in parsed.requests] == [(2, "line-2"), (4, "line-4")]
    assert parsed.rejected == [{"line": 5, "reason": "The prompt is empty.", "custom_id": "line-5"}]


def test_a_csv_row_after_a_multiline_cell_has_its_own_line_number():
    parsed = csv_file('prompt,max_tokens\n"a\nb\nc",4\n"",4\n')
    assert reasons(parsed) == {5: "The prompt is empty."}


@pytest.mark.parametrize("row, reason", [
    ('"",8', "The prompt is empty."),
    ("   ,8", "The prompt is empty."),
    ("Hello,zero", "max_tokens must be a whole number"),
    ("Hello,0", "max_tokens must be between 1"),
    ("Hello,99999", "max_tokens must be between 1 and 1024"),
    ("Hello,8,extra", "The row has 3 fields; the header has 2."),
    ("Hello", "The row has 1 fields; the header has 2."),
])
def test_it_rejects_a_bad_csv_row_with_its_number_and_reason(row, reason):
    parsed = csv_file(f"prompt,max_tokens\nGood one,8\n{row}\nAnother,8\n")
    assert [r.line for r in parsed.requests] == [2, 4]
    assert list(reasons(parsed)) == [3] and reason in reasons(parsed)[3]


def test_a_csv_custom_id_must_be_given_and_unique():
    parsed = csv_file("custom_id,prompt\na,One\n,Two\na,Three\n")
    assert reasons(parsed) == {3: "custom_id is missing: give every line its own custom_id.",
                               4: "custom_id 'a' is already used on line 2."}


@pytest.mark.parametrize("text, message", [
    ("question,answer\nA,B\n", "Line 1 must be a header naming the columns, with a prompt column"),
    ("prompt,temperature\nA,0.5\n", "Unknown column in the header (line 1): 'temperature'"),
    ("prompt,prompt\nA,B\n", "names prompt twice"),
    ("Hello there\n", "with a prompt column"),
])
def test_it_refuses_a_csv_whose_header_cannot_be_used(text, message):
    with pytest.raises(FileRefused, match=message.replace("(", r"\(").replace(")", r"\)")):
        csv_file(text)


def test_it_refuses_a_csv_that_is_not_utf8_naming_the_line():
    with pytest.raises(FileRefused, match="Line 3 is not UTF-8"):
        parse("in.csv", "prompt\nfine\ncaf\xe9\n".encode("latin-1"), 100, None)


def test_it_refuses_a_csv_with_more_rows_than_the_limit():
    with pytest.raises(FileRefused, match="3 prompts; a batch takes at most 2"):
        csv_file("prompt\na\nb\nc\n", limit=2)
