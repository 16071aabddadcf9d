"""GGUF files uploaded from a browser in chunks, each sent with the offset it starts at.

The server names every file itself: chunks go to `UPLOAD_DIR/<uuid>.part`, a finished model to
`MODELS_DIR/<slug>.gguf`; the browser's file name is only shown and suggests the slug. A part file is
locked while a request works on it, so a retried chunk waits for the first and then sees where it stands.
Anything refused takes its part file and row with it: nothing is left half-registered.
"""

import fcntl
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from datetime import timedelta
from pathlib import Path
from typing import BinaryIO

from django.conf import settings
from django.db import IntegrityError
from django.utils import timezone
from django.utils.text import slugify

from clusterpanel.kit import units
from models_app.gguf.meta import GGUFError, check_header, read_metadata
from models_app.library.adding import LibraryError, check_name, register_path
from models_app.models import GgufModel, Upload

HEADER_BYTES = 8
COPY_BYTES = 1 << 20


class UploadError(Exception):
    """The upload is refused; whatever had arrived is gone. `field`: the start's field at fault, if one is."""

    def __init__(self, message: str = "", field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class UploadGone(UploadError):
    def __init__(self) -> None:
        super().__init__("This upload no longer exists (finished, cancelled or expired); start it again.")


class WrongOffset(UploadError):
    def __init__(self, offset: int) -> None:
        super().__init__(f"The panel has {offset} bytes of this upload; send the chunk that starts there.")
        self.offset = offset


class ChunkRefused(UploadError):
    """This chunk is refused; the upload stays as it was."""


def start(owner, name: str, size: int, modified: int, model_name: str = "") -> tuple[Upload, bool]:
    """A new upload, or the owner's unfinished one of the same file (name, size, date): (upload, resumed)."""
    remove_stale()
    name = shown_name(name)
    for earlier in Upload.objects.filter(owner=owner, name=name, size=size, modified=modified):
        if earlier.part_path.exists():
            return earlier, True
        earlier.delete()
    named_by = "model_name" if model_name else "name"  # the model's name comes from the file's when none is given
    slug = free_model_name(model_name or default_model_name(name), named_by)
    check_room(name, size)
    try:
        upload = Upload.objects.create(owner=owner, name=name, size=size, modified=modified, model_name=slug)
    except IntegrityError:
        raise UploadError(f"Another upload just took the name {slug!r}; choose another name.", named_by) from None
    Path(settings.UPLOAD_DIR).mkdir(parents=True, exist_ok=True)
    upload.part_path.open("xb").close()
    return upload, False


def shown_name(name: str) -> str:
    """The browser's file name without control characters (NULs break PostgreSQL); for display only."""
    return "".join(c for c in str(name) if c.isprintable()).strip()[:255] or "unnamed.gguf"


def default_model_name(name: str) -> str:
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    return base[:-5] if base.lower().endswith(".gguf") else base


def free_model_name(wanted: str, field: str) -> str:
    """The slug `register_path` would give, refused now (naming `field`) if taken rather than after gigabytes
    arrive."""
    slug = slugify(wanted.lower())[:80]
    try:
        check_name(slug)
    except LibraryError as exc:
        raise UploadError(str(exc), field) from None
    if GgufModel.objects.filter(name=slug).exists() or Upload.objects.filter(model_name=slug).exists():
        raise UploadError(f"A model named {slug!r} already exists or is being uploaded; choose another name.",
                          field)
    return slug


def check_room(name: str, size: int) -> None:
    if size <= 0:
        raise UploadError(f"{name} is empty.", "size")
    if size > settings.UPLOAD_MAX_BYTES:
        raise UploadError(f"{name} is {units.size(size)}; the panel accepts uploads up to "
                          f"{units.size(settings.UPLOAD_MAX_BYTES)} (UPLOAD_MAX_BYTES).", "size")
    folder = Path(settings.UPLOAD_DIR)
    folder.mkdir(parents=True, exist_ok=True)
    promised = sum(u.size - u.received for u in Upload.objects.all())  # room other uploads still need
    free = shutil.disk_usage(folder).free - promised
    if size > free:
        raise UploadError(f"{name} is {units.size(size)} but only {units.size(max(free, 0))} is free "
                          f"on the panel's disk.", "size")


def append(upload_id, offset: int, body: BinaryIO, length: int) -> GgufModel | None:
    """Write `length` bytes of `body` at `offset`; the registered model once the last byte is in."""
    if length > settings.UPLOAD_CHUNK_BYTES:
        raise ChunkRefused(f"A chunk may hold at most {settings.UPLOAD_CHUNK_BYTES} bytes, not {length}.")
    with locked(upload_id) as (upload, part):
        received = part.seek(0, os.SEEK_END)
        if offset != received:
            raise WrongOffset(received)
        if offset + length > upload.size:
            raise ChunkRefused(f"This chunk ends at byte {offset + length}, past the {upload.size} bytes "
                               f"announced for {upload.name}.")
        received = write_chunk(part, body, length)
        if offset < HEADER_BYTES <= received:
            check_start(upload, part)
        Upload.objects.filter(pk=upload.pk).update(received=received, updated=timezone.now())
        if received == upload.size:
            return finish(upload, part)
    return None


def write_chunk(part: BinaryIO, body: BinaryIO, length: int) -> int:
    start = part.tell()
    remaining = length
    try:
        while remaining and (block := body.read(min(COPY_BYTES, remaining))):
            part.write(block)
            remaining -= len(block)
        part.flush()
    except OSError as exc:  # a full disk, mostly: say so rather than fail in a way the browser retries
        part.truncate(start)
        raise ChunkRefused(f"The panel could not store the chunk: {exc.strerror or exc}.") from None
    if remaining:  # the body ended early: keep only whole chunks, so offsets stay honest
        part.truncate(start)
        raise ChunkRefused(f"The chunk arrived incomplete ({length - remaining} of {length} bytes); send it again.")
    return start + length


def check_start(upload: Upload, part: BinaryIO) -> None:
    """Refuse a file that is not GGUF as soon as its first bytes are here, not after gigabytes."""
    part.seek(0)
    try:
        check_header(part.read(HEADER_BYTES), upload.name)
    except GGUFError as exc:
        discard(upload)
        raise UploadError(str(exc)) from None
    part.seek(0, os.SEEK_END)


def finish(upload: Upload, part: BinaryIO) -> GgufModel:
    """Validate the whole file, link it into the models folder under its slug, register it. Whatever happens,
    the upload's row and part file go, and so does the link unless the model was registered."""
    os.fsync(part.fileno())
    linked = None
    try:
        meta = read_metadata(upload.part_path, label=upload.name)
        linked = link_into_models(upload)
        model = register_path(linked, upload.model_name, meta=meta)
        linked = None
        return model
    except (GGUFError, LibraryError) as exc:
        raise UploadError(str(exc)) from None
    finally:
        if linked is not None:
            linked.unlink(missing_ok=True)
        discard(upload)


def link_into_models(upload: Upload) -> Path:
    final = Path(settings.MODELS_DIR) / f"{upload.model_name}.gguf"
    final.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(upload.part_path, final)  # unlike rename, never replaces a file already there
    except FileExistsError:
        raise UploadError(f"{final} already exists; upload the file again under another name.") from None
    except OSError as exc:
        raise UploadError(f"The panel could not put the file into {final.parent}: {exc.strerror or exc}.") from None
    return final


def cancel(upload_id) -> None:
    with locked(upload_id) as (upload, _):
        discard(upload)


def progress(upload_id) -> Upload:
    """The upload with `received` read from its part file, for a browser about to resume."""
    with locked(upload_id) as (upload, part):
        upload.received = part.seek(0, os.SEEK_END)
        return upload


def discard(upload: Upload) -> None:
    upload.part_path.unlink(missing_ok=True)
    Upload.objects.filter(pk=upload.pk).delete()


@contextmanager
def locked(upload_id) -> Iterator[tuple[Upload, BinaryIO]]:
    """The upload and its part file, locked against other requests for it (a retry racing the original)."""
    upload = Upload.objects.filter(pk=upload_id).first()
    if upload is None:
        raise UploadGone()
    try:
        part = open(upload.part_path, "r+b")
    except FileNotFoundError:
        upload.delete()
        raise UploadGone() from None
    with part:
        fcntl.flock(part, fcntl.LOCK_EX)
        if not Upload.objects.filter(pk=upload_id).exists():  # cancelled or finished while this one waited
            raise UploadGone()
        yield upload, part


def remove_stale() -> None:
    """Drop uploads untouched for UPLOAD_MAX_AGE_HOURS, and part files without a row; cheap enough to run
    whenever an upload starts, so no periodic task is needed."""
    cutoff = timezone.now() - timedelta(hours=settings.UPLOAD_MAX_AGE_HOURS)
    for upload in Upload.objects.filter(updated__lt=cutoff):
        with suppress(BlockingIOError), open(upload.part_path, "ab") as part:
            fcntl.flock(part, fcntl.LOCK_EX | fcntl.LOCK_NB)  # busy means someone is still sending it
            discard(upload)
    folder = Path(settings.UPLOAD_DIR)
    known = {f"{pk}.part" for pk in Upload.objects.values_list("pk", flat=True)}
    for part in folder.glob("*.part") if folder.is_dir() else ():
        if part.name not in known and part.stat().st_mtime < cutoff.timestamp():
            part.unlink(missing_ok=True)
