"""Files as OpenAI's Files API knows them: a batch's input, kept as sent, and a finished batch's output and
error files (written by jobs/batching/output.py)."""

import re

from django.conf import settings
from django.template.defaultfilters import filesizeformat

from jobs.models import ApiFile

PURPOSES = ("batch",)  # what a script may upload: batch input files
FILE_ID = re.compile(r"file-[0-9a-f]{24}")


class FileError(ValueError):
    def __init__(self, message: str, param: str | None = None, status: int = 400) -> None:
        super().__init__(message)
        self.param, self.status = param, status


def store(user, filename: str, data: bytes, purpose: str = "batch") -> ApiFile:
    if purpose not in PURPOSES:
        raise FileError(f"purpose must be \"batch\": the panel keeps files for batches only, not {purpose!r}.",
                        "purpose")
    if len(data) > settings.BATCH_MAX_BYTES:
        raise FileError(f"The file is {filesizeformat(len(data))}; a batch file may be at most "
                        f"{filesizeformat(settings.BATCH_MAX_BYTES)}.", "file", 413)
    name = "".join(c for c in (filename or "batch.jsonl") if c.isprintable())[:200] or "batch.jsonl"
    return ApiFile.objects.create(user=user, purpose=purpose, filename=name, content=data, size=len(data))


def visible(user):
    """A person's files; a lab admin's, everyone's (as batches are)."""
    files = ApiFile.objects.defer("content")
    return files if user.is_lab_admin else files.filter(user=user)


def find(user, public_id) -> ApiFile:
    well_formed = isinstance(public_id, str) and FILE_ID.fullmatch(public_id)  # a NUL is PostgreSQL's 500
    found = visible(user).filter(public_id=public_id).first() if well_formed else None
    if found is None:
        raise FileError(f"No such File object: {public_id}", "file_id", 404)  # others' ids are not confirmed
    return found


def content(file: ApiFile) -> bytes:
    return bytes(ApiFile.objects.values_list("content", flat=True).get(pk=file.pk))
