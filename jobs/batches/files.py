"""Files as OpenAI's Files API knows them: a batch's input, kept as sent, and a finished batch's output and
error files (written by jobs/batches/output.py)."""

import re

from django.conf import settings
from django.template.defaultfilters import filesizeformat

from jobs.batches import batchfile
from jobs.models import ApiFile

PURPOSES = ("batch",)  # what a script may upload: batch input files
FILE_ID = re.compile(r"file-[0-9a-f]{24}")


class FileError(ValueError):
    def __init__(self, message: str, param: str | None = None, status: int = 400) -> None:
        super().__init__(message)
        self.param, self.status = param, status


def upload(user, filename: str, data: bytes, purpose: str) -> ApiFile:
    """A script's upload, kept only if it is what its purpose asks for: a batch input file, in JSONL. Checked as
    it arrives, so a note or a picture is refused now rather than when a batch is made of it."""
    checked(data, purpose)
    try:
        batchfile.check_jsonl(data, settings.BATCH_MAX_LINES)
    except batchfile.FileRefused as exc:
        raise FileError(str(exc), "file") from None
    return store(user, filename, data, purpose)


def store(user, filename: str, data: bytes, purpose: str = "batch") -> ApiFile:
    checked(data, purpose)
    name = "".join(c for c in (filename or "batch.jsonl") if c.isprintable())[:200] or "batch.jsonl"
    return ApiFile.objects.create(user=user, purpose=purpose, filename=name, content=data, size=len(data))


def checked(data: bytes, purpose: str) -> None:
    if purpose not in PURPOSES:
        raise FileError(f"purpose must be \"batch\": the panel keeps files for batches only, not {purpose!r}.",
                        "purpose")
    if len(data) > settings.BATCH_MAX_BYTES:
        raise FileError(f"The file is {filesizeformat(len(data))}; a batch file may be at most "
                        f"{filesizeformat(settings.BATCH_MAX_BYTES)}.", "file", 413)


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
