"""Static files stored under names that change with their content, so that browsers may keep them for good."""

import fcntl
import hashlib
import shutil
from importlib.metadata import version
from pathlib import Path

from django.conf import settings
from whitenoise.storage import CompressedManifestStaticFilesStorage


class HashedStaticStorage(CompressedManifestStaticFilesStorage):
    # The pages' scripts are ES modules importing each other ("./charts.js"): their imports are rewritten to
    # the hashed names too, or every chart page would ask again for the modules it imports.
    support_js_module_import_aggregation = True


def sources_key() -> str:
    """What collectstatic's output depends on: every source file's name and bytes, and the storage's code."""
    from django.contrib.staticfiles.finders import get_finders

    digest = hashlib.sha256(f"{settings.STORAGES}{version('whitenoise')}{version('django')}".encode())
    for finder in get_finders():
        for path, storage in sorted(finder.list([]), key=lambda found: found[0]):
            digest.update(path.encode() + b"\0" + Path(storage.path(path)).read_bytes())
    return digest.hexdigest()[:16]


def collect_once() -> None:
    """Static files in STATIC_ROOT as `make run` collects them, collected once per version of the sources and
    copied from the build cache after (compressing them takes 13 to 19 s of CPU): every test worker and every
    benchmark's scratch panel starts one."""
    from django.core.management import call_command

    cache = settings.BUILD_CACHE_DIR / "collected-static"
    cache.mkdir(parents=True, exist_ok=True)
    kept = cache / sources_key()
    with open(cache / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # others wait for the first one's copy
        if not kept.is_dir():
            call_command("collectstatic", interactive=False, verbosity=0)
            for old in cache.iterdir():  # other versions, and a copy an interrupted run left half made
                if old.is_dir():
                    shutil.rmtree(old, ignore_errors=True)
            shutil.copytree(settings.STATIC_ROOT, kept.with_suffix(".part"))
            kept.with_suffix(".part").rename(kept)
            return
    shutil.copytree(kept, settings.STATIC_ROOT, dirs_exist_ok=True)
