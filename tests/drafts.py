"""Draft models made from the bundled model for tests: a cut (its first layers, scripts/cut_draft.py), and a
copy whose vocabulary differs in one token, which no model may draft with.

Each is written once per bundled model into a cache folder beside the build cache (writing one takes seconds)
and copied from there into the test's folder: a test gets a file of its own to register, and test workers that
write the same cache file at once each write a temporary one and rename it."""

import os
import shutil
from pathlib import Path

import gguf

from models_app.library.bundled import bundled_model_path
from scripts.cut_draft import cut, rewrite

CUT_LAYERS = 20  # of its 30: enough that the draft guesses some of the answer


def cached(folder: Path, name: str, write, target: Path | None = None) -> Path:
    """`folder/name` (or `target`), copied from the cache, which `write(path)` fills the first time."""
    source = bundled_model_path()
    stamp = f"{source.stat().st_size}-{int(source.stat().st_mtime)}"
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "clusterpanel" / "test-drafts" / stamp
    kept = cache / name
    if not kept.exists():
        cache.mkdir(parents=True, exist_ok=True)
        part = cache / f"{name}.{os.getpid()}.part"
        write(part)
        part.rename(kept)
    if target is None:
        target = folder / name
        if target.exists():
            return target
    shutil.copyfile(kept, target)
    return target


def cut_draft(folder: Path, layers: int = CUT_LAYERS) -> Path:
    return cached(folder, f"draft-{layers}.gguf", lambda path: cut(bundled_model_path(), path, layers))


def other_vocabulary(folder: Path, token: int = 1000) -> Path:
    """The bundled model, its token `token` spelled otherwise: as many tokens, not the same ones."""
    return cached(folder, f"other-vocabulary-{token}.gguf", lambda path: write_other(path, token))


def write_other(target: Path, token: int) -> None:
    def respelled(name, kind, value):
        if name == gguf.Keys.Tokenizer.LIST:
            value[token] = "\u00a7\u00a7unlike\u00a7\u00a7"
        return value

    rewrite(gguf.GGUFReader(bundled_model_path()), target, respelled)
