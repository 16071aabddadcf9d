"""A batch's results, one row per input line: as the OpenAI Batch output format (JSONL) or as CSV.

A line that was retried after a laptop failure has several jobs; its row is its
last job's. A rejected line has a row too, as an error, so the output lines up
with the input file line for line.
"""

import csv
import io
import json
import re
from dataclasses import dataclass

from django.db import IntegrityError, transaction
from django.db.models import Sum
from django.http import HttpResponse

from jobs.batches.service import last_attempts
from jobs.engine.embedding import decoded
from jobs.models import ApiFile, Batch, Job, JobStatus, awaiting_retry

CSV_FIELDS = ["line", "custom_id", "status", "output", "error", "finish_reason", "prompt_tokens",
              "completion_tokens", "attempts", "queue_wait_s", "time_to_first_token_s", "tokens_per_s", "total_s"]
FORMULA_STARTS = frozenset("=+-@\t\r＝＋－＠")
PLAIN_NUMBER = re.compile(r"[+-]?[0-9]+(\.[0-9]+)?")
NOT_RUN = {
    JobStatus.CANCELLED: ("batch_cancelled", "This request was cancelled before it finished."),
    JobStatus.QUEUED: ("not_finished", "This request was still queued when the file was made."),
    JobStatus.RUNNING: ("not_finished", "This request was still running when the file was made."),
    "retrying": ("not_finished", "A laptop failed under this request when the file was made; it was about to be "
                                 "retried."),
}


@dataclass
class Row:
    line: int
    custom_id: str
    job: Job | None = None
    attempts: int = 0
    reason: str = ""  # a rejected line's
    code: str | None = None  # a rejected line's, as OpenAI would name it (model_not_found), if it has one
    retrying: bool = False  # failed by a laptop's death; recovery has not yet said whether it runs again

    @property
    def status(self) -> str:
        return "rejected" if self.job is None else "retrying" if self.retrying else self.job.status


def rows(batch: Batch) -> list[Row]:
    """Every input line that had content, in file order."""
    started = dict(batch.items.order_by().values("line").annotate(n=Sum("attempts")).values_list("line", "n"))
    retrying = set(last_attempts(batch).filter(awaiting_retry()).values_list("pk", flat=True))
    found = [Row(job.line, job.custom_id, job, started.get(job.line) or 0, retrying=job.pk in retrying)
             for job in last_attempts(batch)]
    found += [Row(bad["line"], bad.get("custom_id", ""), reason=bad["reason"], code=bad.get("code"))
              for bad in batch.rejected]
    return sorted(found, key=lambda row: row.line)


def openai_lines(batch: Batch) -> list[dict]:
    """OpenAI's batch output line of every input line, in file order."""
    model = batch.deployment.model.name if batch.deployment else "removed-deployment"
    return [openai_row(batch, row, model) for row in rows(batch)]


def as_jsonl(batch: Batch) -> str:
    return "".join(json.dumps(line) + "\n" for line in openai_lines(batch))


def openai_row(batch: Batch, row: Row, model: str) -> dict:
    entry = {"id": f"batch_req_{batch.pk}_{row.line}", "custom_id": row.custom_id or None,
             "response": None, "error": None}
    job = row.job
    if job is None:
        entry["response"] = error_response(400, "invalid_request_error", f"Line {row.line}: {row.reason}", None,
                                           row.code)
    elif row.status == JobStatus.SUCCEEDED:
        entry["response"] = {"status_code": 200, "request_id": f"job-{job.pk}", "body": completion(job, model)}
    elif row.status == JobStatus.FAILED:
        entry["response"] = error_response(500, "server_error", job.error, f"job-{job.pk}")
    else:
        code, message = NOT_RUN[row.status]
        entry["error"] = {"code": code, "message": message}
    return entry


def error_response(status: int, kind: str, message: str, request_id: str | None, code: str | None = None) -> dict:
    return {"status_code": status, "request_id": request_id,
            "body": {"error": {"message": message, "type": kind, "param": None, "code": code}}}


def completion(job: Job, model: str) -> dict:
    """The body /v1/chat/completions (or, for a prompt line, /v1/completions; for an input, /v1/embeddings) would
    have answered."""
    prompt, generated = job.prompt_tokens or 0, job.completion_tokens or 0
    if job.is_embedding:
        return {"object": "list", "model": model, "usage": {"prompt_tokens": prompt, "total_tokens": prompt},
                "data": [{"object": "embedding", "index": i, "embedding": decoded(vector)}
                         for i, vector in enumerate(job.embeddings or [])]}
    usage = {"prompt_tokens": prompt, "completion_tokens": generated, "total_tokens": prompt + generated,
             "prompt_tokens_details": {"cached_tokens": job.cached_tokens}}
    finish = job.finish_reason or "stop"
    if job.prompt and not job.messages:
        return {"id": f"cmpl-{job.pk}", "object": "text_completion", "created": int(job.finished.timestamp()),
                "model": model, "choices": [{"index": 0, "text": job.output, "logprobs": None,
                                             "finish_reason": finish}], "usage": usage}
    message = {"role": "assistant", "content": job.output}
    if job.tool_calls:  # a line with tools: its calls as /v1 gives them, the content null when there is none
        message = {"role": "assistant", "content": job.output or None, "tool_calls": job.tool_calls}
    logprobs = {"content": job.logprobs, "refusal": None} if job.logprobs is not None else None
    return {"id": f"chatcmpl-{job.pk}", "object": "chat.completion", "created": int(job.finished.timestamp()),
            "model": model, "choices": [{"index": 0, "message": message, "logprobs": logprobs,
                                         "finish_reason": finish}],
            "usage": usage}


def as_csv(batch: Batch) -> str:
    """For spreadsheets: every text cell that a spreadsheet would evaluate is neutralised (`inert`), and every
    cell is quoted, so a value's own quotes and separators stay inside its cell."""
    out = io.StringIO()
    writer = csv.DictWriter(out, CSV_FIELDS, quoting=csv.QUOTE_ALL)
    writer.writeheader()
    for row in rows(batch):
        writer.writerow({name: inert(value) if isinstance(value, str) else value
                         for name, value in csv_row(row).items()})
    return out.getvalue()


def inert(text: str) -> str:
    """OWASP's rule against CSV injection: a cell that begins with =, +, -, @, a tab or a carriage return (or a
    full-width =, +, - or @, which some spreadsheets also take) gets a leading single quote, so the spreadsheet
    shows it as text instead of running it as a formula. A plain number such as -2 or +1.5 is left as it is: a
    spreadsheet reads it as that number, nothing else."""
    if text[:1] in FORMULA_STARTS and not PLAIN_NUMBER.fullmatch(text):
        return "'" + text
    return text


def csv_row(row: Row) -> dict:
    job = row.job
    if job is None:
        return {"line": row.line, "custom_id": row.custom_id, "status": "rejected", "error": row.reason}
    timings = job.timings()
    output = json.dumps([decoded(vector) for vector in job.embeddings or []]) if job.is_embedding else job.output
    return {"line": row.line, "custom_id": row.custom_id, "status": row.status, "output": output,
            "error": job.error, "finish_reason": job.finish_reason, "prompt_tokens": job.prompt_tokens,
            "completion_tokens": job.completion_tokens, "attempts": row.attempts,
            **{name: rounded(timings[name]) for name in CSV_FIELDS[-4:]}}


def rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def download(batch: Batch, kind: str) -> HttpResponse:
    """The results as a file to save: `kind` jsonl (OpenAI's batch output lines) or csv."""
    if kind == "jsonl":
        body, content_type = as_jsonl(batch), "application/jsonl"
    else:
        body, content_type = as_csv(batch), "text/csv"
    response = HttpResponse(body, content_type=f"{content_type}; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="batch-{batch.pk}-results.{kind}"'
    return response


def openai_files(batch: Batch, finished: bool) -> dict[str, ApiFile]:
    """OpenAI's output file (the successes) and error file (everything else) of a batch, written the first time
    it is seen finished; {} before."""
    made = {f.kind: f for f in batch.files.defer("content")}
    if not finished or made:
        return made
    lines = openai_lines(batch)
    ok, failed = [], []
    for line in lines:
        (ok if (line.get("response") or {}).get("status_code") == 200 else failed).append(line)
    try:
        with transaction.atomic():
            for kind, chosen in (("output", ok), ("error", failed)):
                if chosen or kind == "output":
                    data = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in chosen).encode()
                    made[kind] = ApiFile.objects.create(
                        user=batch.user, purpose="batch_output", filename=f"batch_{batch.pk}_{kind}.jsonl",
                        content=data, size=len(data), batch=batch, kind=kind)
    except IntegrityError:  # another request wrote them first
        return {f.kind: f for f in batch.files.defer("content")}
    return made
