"""llama.cpp's source as clusterpanel builds it: the pinned llama-cpp-python source distribution, unpacked
safely, with the patches in scripts/llama_patches/ applied; and the plumbing of a build step.

Stdlib only, like scripts/build_llama.py, which uses it.
"""

import hashlib
import re
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

PACKAGE = "llama-cpp-python"
# Changes clusterpanel makes to the vendored llama.cpp, each a unified diff against vendor/llama.cpp, applied
# in name order; their README says why each exists and what to re-check on an upgrade.
PATCHES = Path(__file__).resolve().parent / "llama_patches"


class StepFailed(Exception):
    def __init__(self, step: str, log: Path, hint: str = "") -> None:
        super().__init__(step)
        self.step, self.log, self.hint = step, log, hint


def tell_failure(failure: StepFailed) -> None:
    """A failed step for the person at the terminal: its log's last lines, the step, the log, a hint."""
    tail = failure.log.read_text(errors="replace").splitlines()[-25:]
    print("\n".join(tail), file=sys.stderr)
    print(f"\nBuild failed at step: {failure.step}\nFull log: {failure.log}", file=sys.stderr)
    if failure.hint:
        print(failure.hint, file=sys.stderr)


def say(message: str) -> None:
    print(f"[build] {message}", file=sys.stderr, flush=True)


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def run_step(step: str, argv: list[str], log: Path, cwd: Path | None = None,
             env: dict | None = None, hint: str = "") -> None:
    say(f"{step} (log: {log})")
    started = time.monotonic()
    with open(log, "ab") as handle:
        handle.write(f"\n$ {' '.join(argv)}\n".encode())
        handle.flush()
        result = subprocess.run(argv, cwd=cwd, env=env, stdout=handle, stderr=subprocess.STDOUT)
    if result.returncode != 0:
        raise StepFailed(step, log, hint)
    say(f"{step}: done in {time.monotonic() - started:.0f} s")


def fetch_sdist(version: str, cache: Path, logs: Path) -> Path:
    found = sorted((cache / "sdist").glob(f"llama_cpp_python-{version}.tar.gz"))
    if found:
        return found[0]
    run_step(
        "download the llama-cpp-python source distribution",
        [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
         "-d", str(cache / "sdist"), f"{PACKAGE}=={version}"],
        logs / "download.log",
        hint="Is PyPI reachable (a proxy or a mirror set in pip.conf)?",
    )
    return fetch_sdist(version, cache, logs)


def extract_all(archive: tarfile.TarFile, into: Path) -> None:
    """Every member of `archive` into `into`, with tarfile's "data" filter: nothing lands outside `into` and
    nothing but files, folders and links inside it. Pythons before 3.11.4 (Debian 12 has 3.11.2) lack the
    filter; there, the same places are checked here first."""
    if hasattr(tarfile, "data_filter"):
        archive.extractall(into, filter="data")
        return
    root = into.resolve()
    for member in archive.getmembers():
        target = (root / member.name).resolve()
        places = [target]
        if member.issym():
            places.append((target.parent / member.linkname).resolve())
        elif member.islnk():
            places.append((root / member.linkname).resolve())
        elif not (member.isfile() or member.isdir()):
            places.append(Path("/"))  # a device or a pipe: refused like a path outside
        if not all(place.is_relative_to(root) for place in places):
            raise SystemExit(f"{archive.name}: refused to unpack {member.name!r}, which would land outside {into}")
    archive.extractall(into)


def unpack(sdist: Path, cache: Path, logs: Path) -> Path:
    """The source distribution's folder with the patches applied, in a folder of its own per set of patches."""
    source = cache / f"src-{patches_key()}"
    if (source / ".unpacked").exists():
        return next(p for p in source.iterdir() if p.is_dir())
    shutil.rmtree(source, ignore_errors=True)
    source.mkdir(parents=True)
    with tarfile.open(sdist) as archive:
        extract_all(archive, source)
    tree = next(p for p in source.iterdir() if p.is_dir())
    if (tree / "vendor" / "llama.cpp").is_dir():  # without it, configuring fails next and says so
        apply_patches(tree / "vendor" / "llama.cpp", logs)
    (source / ".unpacked").touch()
    return tree


def patches() -> list[Path]:
    return sorted(PATCHES.glob("*.patch"))


def patches_key() -> str:
    """Changes with any patch's text, so a tree or a build made with other patches is never reused."""
    digest = hashlib.sha256()
    for patch in patches():
        digest.update(patch.name.encode() + b"\0" + patch.read_bytes() + b"\0")
    return digest.hexdigest()[:10]


def apply_patches(tree: Path, logs: Path) -> None:
    for patch in patches():
        run_step(
            f"apply {patch.name} to the vendored llama.cpp",
            ["patch", "-p1", "--forward", "--batch", "--no-backup-if-mismatch", "-d", str(tree), "-i", str(patch)],
            logs / "patch.log",
            hint=f"{patch} no longer applies to this llama.cpp: re-make it as {PATCHES / 'README.md'} says.",
        )


def rpc_protocol(tree: Path) -> str:
    header = (tree / "ggml" / "include" / "ggml-rpc.h").read_text()
    parts = [re.search(rf"RPC_PROTO_{k}_VERSION\s+(\d+)", header).group(1) for k in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(parts)


def llama_commit(source: Path, version: str) -> str:
    """The sdist has no git data; its changelog names the llama.cpp commit it vendors."""
    changelog = (source / "CHANGELOG.md").read_text()
    section = changelog.split(f"## [{version}]", 1)[-1].split("\n## [", 1)[0]
    match = re.search(r"llama\.cpp@([0-9a-f]{7,40})", section)
    return match.group(1) if match else "unknown"
