"""Adding GGUF files to the panel's model library: validated first, nothing half-registered."""

from pathlib import Path

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils.text import slugify

from models_app.gguf.meta import GGUFError, ModelMetadata, read_metadata
from models_app.library.bundled import BundledModelMissing, bundled_model_path
from models_app.models import GgufModel


class LibraryError(Exception):
    pass


def register_path(path: str | Path, name: str = "", bundled: bool = False, checksum_now: bool = False,
                  meta: ModelMetadata | None = None) -> GgufModel:
    """Register the GGUF file at `path` (on the panel's machine) and checksum it, in the background
    unless `checksum_now` (for small files, or before the workers and their broker are up). `meta` is the
    file's metadata when the caller has just read it (an upload), so its header is not read twice."""
    try:
        resolved = Path(path).expanduser().resolve()
        meta = meta or read_metadata(resolved)
    except GGUFError as exc:
        raise LibraryError(str(exc)) from None
    except (OSError, ValueError, RuntimeError) as exc:  # too long, a NUL in it, unreadable, a loop of links
        raise LibraryError(f"The panel cannot read a file at that path: {exc}.") from None
    name = slugify(name or resolved.stem.lower())[:80]
    check_name(name)
    if GgufModel.objects.filter(path=str(resolved)).exists():
        raise LibraryError(f"{resolved} is already in the library.")
    if GgufModel.objects.filter(name=name).exists():
        raise LibraryError(f"A model named {name!r} already exists; choose another name.")
    try:
        with transaction.atomic():
            model = GgufModel.from_metadata(name, str(resolved), meta, bundled=bundled)
            model.save()
            if not checksum_now:
                transaction.on_commit(lambda: _checksum_soon(model.pk))
    except IntegrityError:
        raise LibraryError(f"{resolved} or the name {name!r} was just registered by someone else.") from None
    if checksum_now:
        from models_app.tasks import checksum

        checksum(model.pk)
        model.refresh_from_db()
    return model


def check_name(name: str) -> None:
    """A model name the panel can use: a slug, and whatever the model's own validators refuse (such as a
    name that would shadow one of the models pages), said in words."""
    if not name:
        raise LibraryError("Give the model a name made of letters, digits or hyphens.")
    try:
        GgufModel._meta.get_field("name").run_validators(name)
    except ValidationError as exc:
        raise LibraryError(" ".join(exc.messages)) from None


def ensure_bundled() -> GgufModel | None:
    """The model that ships with the panel, registered once."""
    try:
        path = bundled_model_path()
    except BundledModelMissing:
        return None
    existing = GgufModel.objects.filter(bundled=True).first()
    return existing or register_path(path, name="smollm2-135m-instruct-q4_1", bundled=True, checksum_now=True)


def _checksum_soon(model_id: int) -> None:
    from models_app.tasks import checksum

    checksum.delay(model_id)
