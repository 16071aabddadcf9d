"""Generated hostile values at every JSON endpoint and every form, as a user of the right role: numbers huge,
negative, fractional, NaN, Infinity, 1e400 and 10**30; digits that are not ASCII ("²", "٣"); lone UTF-16
surrogates; NULs; wrong JSON types; deep nesting; very long strings; fields left out. Whatever comes, no view
answers 5xx: a JSON endpoint answers 4xx in its documented shape (docs/api.md), a form shows itself again with
the error or redirects. A body that happens to be valid may do what it asks (a job is queued, nothing runs it).

The OpenAI API answers a valid body only when an engine takes its job; those tests run with the test run's Redis
stopped, so such a request ends at once in its documented 503 (service_unavailable) instead of waiting."""

import csv
import io
import json
import string
import uuid
from collections.abc import Iterator
from urllib.parse import quote_from_bytes

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from jobs.models import Conversation
from models_app.models import Upload
from nodes.models import Node
from tests.jobs.conftest import bearer

pytestmark = pytest.mark.timeout(600)
EXAMPLES = settings(max_examples=60, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                           HealthCheck.data_too_large])
LONG = "x" * 100_000
READY = "<the ready deployment>"

# ---- values ----

NUMBERS = st.one_of(
    st.integers(-(10**30), 10**30), st.sampled_from([10**30, -(10**30), 10**400, 2**63, 2**64 - 1, -1, 0]),
    st.floats(allow_nan=True, allow_infinity=True), st.just(float("inf")),  # 1e400 reads as Infinity
)
ODD_DIGITS = st.text(st.characters(categories=["Nd", "No"]), min_size=1, max_size=6)  # "²", "٣", "１"
SURROGATES = st.text(st.characters(codec=None, categories=["Cs"]), min_size=1, max_size=3)
BROKEN = st.one_of(st.just("\ud800"), SURROGATES.map(lambda s: f"a{s}b"))  # text with a lone surrogate
TEXTS = st.one_of(st.text(max_size=30), ODD_DIGITS, BROKEN,
                  st.sampled_from(["", "\x00", LONG, "-1", "1e400", "NaN", "Infinity", "1.5", " 7 "]))
SCALARS = st.one_of(st.none(), st.booleans(), NUMBERS, TEXTS)
CONTAINERS = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXTS, inner,
                                                                                               max_size=3),
                          max_leaves=6).filter(lambda value: isinstance(value, list | dict))
NESTED = st.integers(1, 900).map(lambda depth: json.loads("[" * depth + "]" * depth))
# Each kind weighs the same, so broken text, say, is not one leaf among hundreds.
HOSTILE = st.one_of(NUMBERS, TEXTS, BROKEN, st.none(), st.booleans(), CONTAINERS, NESTED)
RAW_BODIES = st.one_of(st.binary(max_size=80), st.sampled_from([
    b"", b"null", b"[]", b'"x"', b"{", b"[" * 100_000 + b"]" * 100_000, b'{"a": 1e400}', b'{"a": NaN}',
    b'{"a": 1' + b"0" * 5000 + b"}", b"\xff\xfe", b'{"a": "\\ud800"}']))


def maybe(valid, hostile=HOSTILE):
    """A field's value: a good one or a hostile one."""
    return st.one_of(as_strategy(valid), hostile)


def as_strategy(value) -> st.SearchStrategy:
    return value if isinstance(value, st.SearchStrategy) else st.just(value)


def one_bad(fields: dict) -> st.SearchStrategy:
    """A good body with one field hostile or left out, so the hostile value reaches its own check."""
    def spoil(name: str) -> st.SearchStrategy:
        good = {other: as_strategy(value) for other, value in fields.items() if other != name}
        return st.fixed_dictionaries(good, optional={name: HOSTILE})

    return st.sampled_from(sorted(fields)).flatmap(spoil)


def good_or_one_bad(fields: dict) -> st.SearchStrategy:
    """For a part of a body: as often good as not, so that a bad value elsewhere is not masked by this one."""
    return st.fixed_dictionaries({name: as_strategy(value) for name, value in fields.items()}) | one_bad(fields)


def body_of(fields: dict) -> st.SearchStrategy:
    """A JSON body from `fields`: one bad field in a good body, or every field present or not, good or not."""
    mixed = st.fixed_dictionaries({}, optional={name: maybe(value) for name, value in fields.items()})
    return one_bad(fields) | mixed


def with_ready(body, ready):
    """READY in a generated body stands for the `ready` deployment's id, unknown when strategies are made."""
    if isinstance(body, dict) and body.get("deployment") == READY:
        return {**body, "deployment": ready.pk}
    return body


def encoded(value) -> bytes:
    return json.dumps(value).encode()  # surrogates become "\\ud800" escapes, as a hostile client sends them


def query_values() -> st.SearchStrategy:
    """A query string value as raw bytes: any text, or bytes that are not UTF-8 at all."""
    texts = TEXTS.map(lambda text: text.encode("utf-8", "surrogatepass")) | NUMBERS.map(lambda n: str(n).encode())
    return texts | st.binary(max_size=12)


def query(**values: bytes) -> str:
    return "&".join(f"{name}={quote_from_bytes(value)}" for name, value in values.items())


PATH_IDS = st.one_of(st.integers(0, 10**30), st.sampled_from([2**63, 2**63 - 1, 10**400]))

# ---- what an answer may be ----


def never_a_server_error(answer) -> None:
    event(f"answered {answer.status_code}")  # --hypothesis-show-statistics tells how far values got
    assert answer.status_code < 500, (answer.status_code, answer.content[:500])


def rest_shape(answer) -> None:
    """/api/, the chat page's and the laptop pages' JSON: {"error": sentence, "field": name or null}."""
    never_a_server_error(answer)
    if answer.status_code >= 400:
        error = answer.json()
        assert isinstance(error["error"], str) and error["error"] and "field" in error, error
        event(f"refused naming {error['field']}")


def page_json_shape(answer) -> None:
    """The upload protocol's JSON: {"error": sentence, ...}."""
    never_a_server_error(answer)
    if answer.status_code >= 400:
        assert isinstance(answer.json()["error"], str), answer.content


def openai_shape(answer) -> None:
    """OpenAI's: {"error": {"message", "type", "param", "code"}}; a valid body meets the stopped Redis (503)."""
    error = answer.json().get("error") if answer.status_code >= 400 else None
    if answer.status_code == 503:
        event("answered 503")
        assert error["code"] in ("service_unavailable", "model_not_available"), error
    else:
        never_a_server_error(answer)
    if error is not None:
        assert set(error) == {"message", "type", "param", "code"} and isinstance(error["message"], str), error


def form_shape(answer) -> None:
    """A form: shown again (with its error) or a redirect."""
    never_a_server_error(answer)
    assert answer.status_code in (200, 302, 400, 404), answer.status_code
    form = (answer.context or {}).get("form")
    if form is not None and form.is_bound:
        event(f"form errors in {sorted(form.errors)}")


# ---- who asks ----


CLIENTS: dict[int | None, Client] | None = None  # the running test's, by user id (None: no one signed in)


@pytest.fixture(autouse=True)
def clients_of_this_test() -> Iterator[None]:
    """Each test makes its clients once, for all its examples: a new client loads every middleware again, and
    WhiteNoise's reads the whole static folder (23 ms a client; the 1,900 made once per example made this file the
    suite's slowest). A client keeps its cookies from one example to the next, as a browser would. A file that
    imports `signed_in` imports this fixture with it; without it, each call makes a new client."""
    global CLIENTS
    CLIENTS = {}
    yield
    CLIENTS = None


def client_of(user) -> Client:
    if CLIENTS is None:
        made = Client()
    elif (user.pk if user else None) in CLIENTS:
        return CLIENTS[user.pk if user else None]
    else:
        made = CLIENTS[user.pk if user else None] = Client()
    if user:
        made.force_login(user)
    return made


def signed_in(user) -> Client:
    return client_of(user)


def anonymous() -> Client:
    """No one signed in: the API's callers, who bring a token."""
    return client_of(None)


def post_json(client: Client, url: str, raw: bytes, **headers):
    return client.post(url, raw, content_type="application/json", **headers)


HI = [{"role": "user", "content": "Hi"}]
PARAMS = {"temperature": 0.5, "top_p": 0.9, "top_k": 40, "max_tokens": 8, "seed": 1, "stop": ["\n"],
          "repeat_penalty": 1.0}
MESSAGE = {"role": "user", "content": "Hi"}
MESSAGES = st.one_of(st.just(HI), st.just(HI), st.lists(body_of(MESSAGE), min_size=1, max_size=3), HOSTILE)
API_JOB = body_of({"kind": st.sampled_from(["chat", "completion"]), "messages": MESSAGES, "prompt": "Once",
                   "params": good_or_one_bad(PARAMS), "deployment": READY})
TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
OPENAI = {**PARAMS, "model": "tiny", "max_completion_tokens": 8, "n": 1, "stream": False,
          "stream_options": {"include_usage": True}, "frequency_penalty": 0, "presence_penalty": 0,
          "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}},
          "tools": [TOOL], "tool_choice": "auto", "parallel_tool_calls": True, "logprobs": True, "top_logprobs": 2}

# ---- the REST API ----


@EXAMPLES
@given(body=API_JOB | RAW_BODIES)
def test_it_answers_post_api_jobs_in_shape(ready, token, body):
    raw = body if isinstance(body, bytes) else encoded(with_ready(body, ready))
    rest_shape(post_json(anonymous(), "/api/jobs/", raw, **token))


@EXAMPLES
@given(path=st.sampled_from(["/api/jobs/", "/api/deployments/", "/api/nodes/"]),
       limit=query_values(), offset=query_values(), everyone=query_values())
def test_it_answers_api_lists_in_shape(ready, alice, path, limit, offset, everyone):
    answer = anonymous().get(f"{path}?{query(limit=limit, offset=offset, all=everyone)}", **bearer(alice))
    rest_shape(answer)


@EXAMPLES
@given(pk=PATH_IDS, cancel=st.booleans())
def test_it_answers_api_job_ids_in_shape(ready, token, pk, cancel):
    client = anonymous()
    answer = client.post(f"/api/jobs/{pk}/cancel/", **token) if cancel else client.get(f"/api/jobs/{pk}/", **token)
    rest_shape(answer)


# ---- the OpenAI API ----


@EXAMPLES
@given(body=body_of({**OPENAI, "messages": HI}) | RAW_BODIES)
def test_it_answers_chat_completions_in_shape(no_redis, token, body):
    raw = body if isinstance(body, bytes) else encoded(body)
    openai_shape(post_json(anonymous(), "/v1/chat/completions", raw, **token))


@EXAMPLES
@given(body=body_of({**OPENAI, "prompt": "Once"}) | RAW_BODIES)
def test_it_answers_completions_in_shape(no_redis, token, body):
    raw = body if isinstance(body, bytes) else encoded(body)
    openai_shape(post_json(anonymous(), "/v1/completions", raw, **token))


# ---- the chat page ----


@EXAMPLES
@given(body=body_of({"text": "Hello", "system_prompt": "Be brief.", "params": good_or_one_bad(PARAMS),
                     "deployment": st.sampled_from([READY, "1"])}) | RAW_BODIES)
def test_it_answers_chat_send_in_shape(ready, bob, body):
    conversation = Conversation.objects.create(user=bob, deployment=ready)
    raw = body if isinstance(body, bytes) else encoded(with_ready(body, ready))
    rest_shape(post_json(signed_in(bob), f"/chat/{conversation.pk}/send/", raw))


@EXAMPLES
@given(pk=PATH_IDS, stop=st.booleans())
def test_it_answers_chat_job_ids(ready, bob, pk, stop):
    client = signed_in(bob)
    form_shape(client.post(f"/chat/jobs/{pk}/stop/") if stop else client.get(f"/chat/jobs/{pk}/"))
    form_shape(client.get(f"/chat/{pk}/"))


# ---- laptops ----


@EXAMPLES
@given(node=query_values(), seconds=query_values())
def test_it_answers_recent_metrics_in_shape(alice, node, seconds):
    rest_shape(signed_in(alice).get(f"/nodes/metrics/recent.json?{query(node=node, seconds=seconds)}"))


NODE_FORM = {"name": "lab-9", "host": "127.0.0.1", "port": "1", "username": "lab", "connection": "tunnel",
             "install_dir": "~/.clusterpanel", "auth": "panel_key"}


def form_values(fields: dict) -> st.SearchStrategy:
    """Form fields as a browser would send them (strings), good or hostile, each possibly missing."""
    texts = TEXTS | NUMBERS.map(str)
    return st.fixed_dictionaries({}, optional={name: st.one_of(st.just(value), texts)
                                               for name, value in fields.items()})


def posted(values: dict) -> dict:
    """A lone surrogate cannot cross HTTP as UTF-8: a browser would send the bytes, which Django reads with
    replacement characters. The test client needs them as that text."""
    return {name: value.encode("utf-8", "surrogatepass").decode("utf-8", "replace") for name, value in values.items()}


@EXAMPLES
@given(values=form_values(NODE_FORM))
def test_it_answers_the_add_laptop_form(alice, values):
    form_shape(signed_in(alice).post("/nodes/add/", posted(values)))


@EXAMPLES
@given(values=form_values({**NODE_FORM, "signed_host_key": "x", "password": "p", "private_key": "k"}))
def test_it_answers_the_confirm_laptop_form(alice, values):
    form_shape(signed_in(alice).post("/nodes/add/", posted({**values, "signed_host_key": values.get(
        "signed_host_key", "")})))


@EXAMPLES
@given(values=form_values({"port": "50052", "state": "start"}))
def test_it_answers_the_rpc_server_form(alice, values):
    Node.objects.get_or_create(name="lab-1", defaults={"host": "10.0.0.1", "username": "lab"})
    form_shape(signed_in(alice).post("/nodes/lab-1/rpc-server/", posted(values)))


# ---- models: plan, deploy, upload ----

PLAN_FORM = {"model": "1", "nodes": "1", "ctx": "2048", "head_layers": "on", "mode": "fastest", "preseed": "on",
             "order": "lab-1"}


@EXAMPLES
@given(values=form_values(PLAN_FORM), deploy=st.booleans())
def test_it_answers_the_plan_and_deploy_forms(ready, alice, values, deploy):
    values = {**posted(values), **({"model": str(ready.model.pk)} if values.get("model") == "1" else {})}
    client = signed_in(alice)
    form_shape(client.post("/models/deployments/new/", values) if deploy else client.get("/models/plan/", values))


UPLOAD = {"name": "tiny.gguf", "size": 1024, "modified": 1_700_000_000_000, "model_name": "tiny-up"}


@EXAMPLES
@given(body=body_of(UPLOAD) | RAW_BODIES)
def test_it_answers_upload_starts_in_shape(alice, body):
    raw = body if isinstance(body, bytes) else encoded(body)
    page_json_shape(post_json(signed_in(alice), "/api/uploads/", raw))


@EXAMPLES
@given(offset=TEXTS | NUMBERS.map(str), chunk=st.binary(max_size=64))
def test_it_answers_upload_chunks_in_shape(alice, offset, chunk):
    upload = Upload.objects.filter(owner=alice).first()
    if upload is None:
        started = post_json(signed_in(alice), "/api/uploads/", encoded(UPLOAD))
        upload = Upload.objects.get(pk=uuid.UUID(started.json()["id"]))
    header = offset.encode("utf-8", "surrogatepass").decode("latin-1")
    page_json_shape(signed_in(alice).patch(f"/api/uploads/{upload.pk}/", chunk,
                                           content_type="application/offset+octet-stream",
                                           HTTP_UPLOAD_OFFSET=header))


# ---- batches and tokens ----

IDS = st.text(string.ascii_letters, min_size=1, max_size=4)
GOOD_LINE = st.builds(lambda custom_id: {"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions",
                                         "body": {"messages": HI, **PARAMS}}, IDS)
BATCH_LINE = GOOD_LINE | one_bad({"custom_id": IDS, "method": "POST", "url": "/v1/chat/completions",
                                  "body": good_or_one_bad({"messages": MESSAGES, **PARAMS})})
CELLS = st.one_of(TEXTS, NUMBERS.map(str))
CSV_ROW = st.tuples(maybe("Say hi", CELLS), maybe("8", CELLS), maybe("q", CELLS))
# Names as Django's multipart parser leaves them (a base name, never "", "." or ".."); the test client would refuse
# the others itself.
FILE_NAMES = TEXTS.filter(lambda name: name.strip(".") and "/" not in name and "\\" not in name)


def jsonl_file(lines: list) -> bytes:
    return b"\n".join(encoded(line) for line in lines)


def csv_file(rows: list) -> bytes:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerows([("prompt", "max_tokens", "custom_id"), *rows])
    return out.getvalue().encode("utf-8", "surrogatepass")  # a lone surrogate: bytes that are not UTF-8


def upload_batch(user, deployment: str, name: str, data: bytes):
    name = name.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return signed_in(user).post("/jobs/batches/", posted({"deployment": deployment}) | {
        "file": SimpleUploadedFile(name, data)})


@settings(EXAMPLES, max_examples=120)
@given(lines=st.lists(BATCH_LINE, min_size=1, max_size=4))
def test_it_answers_batch_files_line_by_line(ready, bob, lines):
    form_shape(upload_batch(bob, str(ready.pk), "in.jsonl", jsonl_file(lines)))


@EXAMPLES
@given(rows=st.lists(CSV_ROW, min_size=1, max_size=4))
def test_it_answers_csv_batch_files(ready, bob, rows):
    form_shape(upload_batch(bob, str(ready.pk), "in.csv", csv_file(rows)))


@EXAMPLES
@given(name=FILE_NAMES, data=st.binary(max_size=100), deployment=st.one_of(st.just(READY), TEXTS))
def test_it_answers_the_batch_upload_form(ready, bob, name, data, deployment):
    form_shape(upload_batch(bob, str(ready.pk) if deployment == READY else deployment, name, data))


@EXAMPLES
@given(name=TEXTS, revoke=PATH_IDS)
def test_it_answers_the_token_forms(bob, name, revoke):
    client = signed_in(bob)
    form_shape(client.post("/account/tokens/", posted({"name": name})))
    form_shape(client.post(f"/account/tokens/{revoke}/revoke/"))

