"""llama.cpp's source for a laptop to build its own ggml-rpc-server: the very tree the head was built from.

scripts/build_llama.py unpacks the pinned llama-cpp-python source distribution into
`<cache>/src-<patches key>/…/vendor/llama.cpp` and applies scripts/llama_patches/. Of that tree a laptop needs
only ggml (the backends it may build: CPU, CUDA, Metal, Vulkan, RPC) and tools/rpc; a short CMakeLists.txt of
ours stands in for llama.cpp's top level (which would configure libllama, common and every tool too). Packed once
per set of patches, beside the tree, reproducibly (same bytes, same sha256), written aside and renamed.
"""

import fcntl
import gzip
import hashlib
import io
import json
import os
import re
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from nodes.runtime.bundle import Manifested, RuntimeNotFound, cache_dir

TOP = "llama-rpc-source"
# ggml/src's folders for the backends a laptop may build; the others (SYCL, CANN, OpenCL, …) stay behind.
BACKENDS = ("ggml-cpu", "ggml-cuda", "ggml-metal", "ggml-vulkan", "ggml-rpc")
SKIPPED_NAMES = {".git", "__pycache__", ".DS_Store"}
# llama.cpp's top level sets these for ggml; the rest of it concerns libllama and the tools.
WRAPPER = """\
# Written by clusterpanel (nodes/runtime/rpcsource.py): llama.cpp's ggml and tools/rpc, built as llama.cpp's own top
# level builds them (output folders, the defaults it changes), without libllama, common or the other tools.
cmake_minimum_required(VERSION 3.14...3.28)
project("llama-rpc-server" C CXX)
if (NOT XCODE AND NOT MSVC AND NOT CMAKE_BUILD_TYPE)
    set(CMAKE_BUILD_TYPE Release CACHE STRING "Build type" FORCE)
endif()
set(CMAKE_RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
set(CMAKE_LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
if (NOT DEFINED GGML_LLAMAFILE)
    set(GGML_LLAMAFILE_DEFAULT ON)
endif()
if (NOT DEFINED GGML_CUDA_GRAPHS)
    set(GGML_CUDA_GRAPHS_DEFAULT ON)
endif()
add_subdirectory(llama.cpp/ggml)
add_subdirectory(llama.cpp/tools/rpc)
"""


class SourceError(RuntimeNotFound):
    pass


@dataclass(frozen=True)
class SourceTarball(Manifested):
    path: Path
    manifest: dict


def layout_key() -> str:
    """Changes with what goes into the tarball, so a tarball packed another way is never reused."""
    return hashlib.sha256(json.dumps([TOP, BACKENDS, sorted(SKIPPED_NAMES), WRAPPER]).encode()).hexdigest()[:6]


def sources():
    """scripts/llama_source.py: stdlib only, beside manage.py (imported late: the panel runs without it)."""
    from scripts import llama_source

    return llama_source


def tarball() -> SourceTarball:
    """The source tarball of the head's own patched tree: made on first use, then read from the cache."""
    cache, key = cache_dir(), f"{sources().patches_key()}-{layout_key()}"
    manifest_path = cache / f"rpc-source-{key}.json"
    if not manifest_path.exists():
        with open(cache / ".rpc-source.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # a second worker waits, then finds it made
            if not manifest_path.exists():
                make(patched_tree(cache), cache, key)
    manifest = json.loads(manifest_path.read_text())
    return SourceTarball(cache / manifest["tarball"], manifest)


def patched_tree(cache: Path) -> Path:
    """vendor/llama.cpp of the head's build; unpacked and patched again from the cached source distribution when
    it was removed (the panel's Docker image keeps only the sdist)."""
    llama = sources()
    version = cache.name.removeprefix(f"{llama.PACKAGE}-")
    unpacked = cache / f"src-{llama.patches_key()}"
    if not (unpacked / ".unpacked").exists():
        sdists = sorted((cache / "sdist").glob(f"llama_cpp_python-{version}.tar.gz"))
        if not sdists:
            raise SourceError(f"No llama-cpp-python {version} source in {cache}: run `make setup` on the panel.")
        (cache / "logs").mkdir(exist_ok=True)
        with open(cache / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # scripts/build_llama.py's own lock on the cache
            try:
                llama.unpack(sdists[0], cache, cache / "logs")
            except llama.StepFailed as failed:
                raise SourceError(f"Could not prepare the llama.cpp source: {failed.step} (see {failed.log}).") \
                    from None
    tree = next(p for p in unpacked.iterdir() if p.is_dir()) / "vendor" / "llama.cpp"
    if not (tree / "ggml" / "CMakeLists.txt").exists():
        raise SourceError(f"{tree} holds no llama.cpp tree: run `make setup` on the panel.")
    return tree


def members(tree: Path) -> list[tuple[str, Path]]:
    """(name in the tarball, file) for every file a laptop's build reads, sorted."""
    roots = [tree / "LICENSE", tree / "ggml" / "CMakeLists.txt", tree / "ggml" / "cmake", tree / "ggml" / "include",
             tree / "tools" / "rpc"]
    roots += [p for p in (tree / "ggml" / "src").iterdir() if p.is_file() or p.name in BACKENDS]
    found = []
    for root in roots:
        for path in [root] if root.is_file() else sorted(root.rglob("*")):
            if path.is_file() and not SKIPPED_NAMES & set(path.relative_to(tree).parts):
                found.append((f"{TOP}/llama.cpp/{path.relative_to(tree).as_posix()}", path))
    return sorted(found)


def cmake_minimums(tree: Path) -> dict[str, str]:
    """What each part's CMakeLists.txt says it needs (`cmake_minimum_required(VERSION 3.18)`)."""
    places = {"ggml": tree / "ggml/CMakeLists.txt", "cuda": tree / "ggml/src/ggml-cuda/CMakeLists.txt",
              "vulkan": tree / "ggml/src/ggml-vulkan/CMakeLists.txt",
              "metal": tree / "ggml/src/ggml-metal/CMakeLists.txt"}
    found = {}
    for name, path in places.items():
        match = re.search(r"cmake_minimum_required\s*\(\s*VERSION\s+(\d+(?:\.\d+)*)", path.read_text()) \
            if path.exists() else None
        if match:
            found[name] = match.group(1)
    return found


def add(archive: tarfile.TarFile, name: str, data: bytes, mode: int = 0o644) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), mode, 0  # no owner, no date: the same tree, the same bytes
    archive.addfile(info, io.BytesIO(data))


def make(tree: Path, cache: Path, key: str) -> None:
    name = f"rpc-source-{key}.tar.gz"
    handle, staging = tempfile.mkstemp(prefix=f".{name}.", dir=cache)
    try:
        with os.fdopen(handle, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as packed, \
                tarfile.open(fileobj=packed, mode="w", format=tarfile.PAX_FORMAT) as archive:
            add(archive, f"{TOP}/CMakeLists.txt", WRAPPER.encode())
            files = members(tree)
            for member, path in files:
                add(archive, member, path.read_bytes(), 0o755 if os.access(path, os.X_OK) else 0o644)
        digest = hashlib.sha256(Path(staging).read_bytes()).hexdigest()
        os.replace(staging, cache / name)
    finally:
        Path(staging).unlink(missing_ok=True)
    manifest = {"tarball": name, "sha256": digest, "size": (cache / name).stat().st_size, "files": len(files) + 1,
                "rpc_protocol": sources().rpc_protocol(tree), "cmake_minimum": cmake_minimums(tree),
                "patches": [patch.name for patch in sources().patches()], "patches_key": key}
    aside = cache / f".rpc-source-{key}.json.new"
    aside.write_text(json.dumps(manifest, indent=2))
    os.replace(aside, cache / f"rpc-source-{key}.json")  # last: its presence says the tarball is whole
