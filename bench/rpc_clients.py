"""Head library folders that differ only in their RPC client, for benchmarks that compare llama.cpp patches.

Each is a copy of the head's own library folder (llama-cpp-python's `lib/`) with
`libggml-rpc.so` compiled here, the same way for each, from the vendored source
in the cached llama-cpp-python sdist with the named patches applied. Pointed at
by LLAMA_CPP_LIB_PATH, a head process (verification load, engine) then uses that
client. Only the client is rebuilt: the laptops' runtime stays the installed one.
The shared build is never touched.
"""

import os
import shutil
import subprocess
import tarfile
from pathlib import Path

from models_app.deploying.tensor_cache import head_rpc_library
from scripts import build_llama
from scripts import llama_source as sources

RPC_SOURCES = ("ggml/src/ggml-rpc/ggml-rpc.cpp", "ggml/src/ggml-rpc/transport.cpp")
DEFINES = ("-DGGML_BACKEND_DL", "-DGGML_BACKEND_BUILD", "-DGGML_BACKEND_SHARED", "-DGGML_SHARED")


def vendored_ggml(into: Path) -> Path:
    """The vendored llama.cpp's ggml folder, unpatched, from the cached sdist (downloaded if absent)."""
    version = build_llama.pinned_version()
    root = Path(os.environ.get("CLUSTERPANEL_CACHE", Path.home() / ".cache" / "clusterpanel")).expanduser()
    into.mkdir(parents=True, exist_ok=True)
    sdist = sources.fetch_sdist(version, root / f"{sources.PACKAGE}-{version}", into)
    with tarfile.open(sdist) as archive:
        members = [m for m in archive.getmembers() if "/vendor/llama.cpp/ggml/" in m.name and m.isfile()]
        archive.extractall(into, members=members, filter="data")
    return next(into.glob("*/vendor/llama.cpp"))


def build(name: str, patches: list[Path], work: Path) -> Path:
    """A library folder whose RPC client has `patches` applied (none: upstream's), made under `work`."""
    tree = work / f"src-{name}"
    shutil.copytree(vendored_ggml(work / "sdist"), tree)
    for patch in patches:
        subprocess.run(["patch", "-p1", "--forward", "--batch", "--quiet", "-d", str(tree), "-i", str(patch.resolve())],
                       check=True)
    head_lib = head_rpc_library().parent
    folder = work / f"lib-{name}"
    shutil.copytree(head_lib, folder, symlinks=False)
    subprocess.run(["g++", "-std=c++17", "-O2", "-fPIC", "-shared", *DEFINES,
                    f"-I{tree}/ggml/include", f"-I{tree}/ggml/src", f"-I{tree}/ggml/src/ggml-rpc",
                    *(str(tree / s) for s in RPC_SOURCES), "-o", str(folder / "libggml-rpc.so"),
                    f"-L{folder}", "-l:libggml-base.so.0", "-Wl,-rpath,$ORIGIN", "-Wl,--no-undefined"],
                   check=True)
    return folder
