#!/usr/bin/env python3
"""The laptops' runtime bundle for 64-bit ARM Linux (a Raspberry Pi 5, ARM laptops and boards), cross-compiled.

The same patched llama.cpp tree and flags as scripts/build_llama.py's x86-64 bundle, compiled by Debian's cross
compiler (gcc-aarch64-linux-gnu, g++-aarch64-linux-gnu) in a build folder of its own. Only what a laptop runs:
`ggml-rpc-server`, its ggml libraries and llama.cpp's CPU variants for ARM Linux, one of which ggml loads at run
time from the CPU's features (a Pi 5's Cortex-A76 takes armv8.2_2: dot product and FP16 arithmetic; cores with
SVE or int8 matrix multiply take the later ones). No libllama and no wheel: the head stays x86-64. GCC 12
(Debian 12's) knows no SME, so llama.cpp's two armv9.2 variants are left out; a CPU with SME takes armv8.6_2.

Optional, like the Vulkan backend: `make run` does not wait for it; `make arm` and `make test` build it, once
per source and flags, into runtime-<key>-aarch64/ beside the x86-64 bundle (nodes/runtime/bundle.py gives each laptop
the bundle of its architecture). It downloads nothing but the source distribution the usual build fetches.

Stdlib only. Prints the bundle's manifest path on the last line of stdout. On failure: the step that failed and
its log, never a traceback.
"""

import argparse
import fcntl
import os
import shutil
import sys
from pathlib import Path

try:
    from scripts import build_llama
    from scripts import llama_source as sources
except ImportError:
    import build_llama
    import llama_source as sources

ARCH = "aarch64"
CROSS = "aarch64-linux-gnu-"  # the cross tools' prefix: gcc, g++, objdump
SYSROOT = Path("/usr/aarch64-linux-gnu")  # Debian's arm64 cross libraries (libc6-arm64-cross and the like)
# llama.cpp's ARM Linux variants (ggml/src/CMakeLists.txt) that GCC 12 can compile.
CPU_VARIANTS = ["armv8.0_1", "armv8.2_1", "armv8.2_2", "armv8.2_3", "armv8.6_1", "armv8.6_2"]
CROSS_CMAKE_ARGS = [
    "-DCMAKE_SYSTEM_NAME=Linux",
    f"-DCMAKE_SYSTEM_PROCESSOR={ARCH}",
    f"-DCMAKE_C_COMPILER={CROSS}gcc",
    f"-DCMAKE_CXX_COMPILER={CROSS}g++",
    # Libraries and headers from the arm64 sysroot only, never this machine's x86-64 ones; programs from here.
    f"-DCMAKE_FIND_ROOT_PATH={SYSROOT}",
    "-DCMAKE_FIND_ROOT_PATH_MODE_PROGRAM=NEVER",
    "-DCMAKE_FIND_ROOT_PATH_MODE_LIBRARY=ONLY",
    "-DCMAKE_FIND_ROOT_PATH_MODE_INCLUDE=ONLY",
]
# GCC 12 cannot compile llama.cpp's two SME variants (armv9.2_*), yet libggml waits on every variant: each is
# an add_dependencies() of it (ggml/src/CMakeLists.txt). CMake includes this after each project(); libggml then
# no longer waits on a variant left out, and the shared source stays unpatched.
LEAVE_OUT = """include_guard(GLOBAL)
function(add_dependencies target)
  list(FILTER ARGN EXCLUDE REGEX "^ggml-cpu-armv9[.]2_[0-9]+$")
  if(ARGN)
    _add_dependencies(${target} ${ARGN})
  endif()
endfunction()
"""
NEEDS = {  # what the build needs → the Debian/Ubuntu package with it (libgomp for arm64 comes with the compiler)
    f"{CROSS}gcc": "gcc-aarch64-linux-gnu",
    f"{CROSS}g++": "g++-aarch64-linux-gnu",
    f"{CROSS}objdump": "binutils-aarch64-linux-gnu",
}


def missing() -> list[str]:
    """Debian packages the cross build lacks on this machine."""
    return sorted({package for tool, package in NEEDS.items() if not shutil.which(tool)})


def cmake_args() -> list[str]:
    return [*build_llama.LLAMA_CPP_CMAKE_ARGS, *CROSS_CMAKE_ARGS]


def runtime_dir(cache: Path) -> Path:
    key = build_llama.flags_key(cmake_args(), CPU_VARIANTS, build_llama.BUNDLED_SYSTEM_LIBS, LEAVE_OUT)
    return cache / f"runtime-{key}-{ARCH}"


def build(tree: Path, cache: Path, logs: Path, jobs: int) -> Path:
    """The cross build's bin/ folder: ggml-rpc-server, its ggml libraries and the ARM CPU variants."""
    folder = cache / f"{ARCH}-build-{sources.patches_key()}"
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "leave-out-variants.cmake").write_text(LEAVE_OUT)
    sources.run_step(
        f"configure llama.cpp for {ARCH} with the cross compiler (same tree and flags as the x86-64 bundle)",
        ["cmake", "-S", str(tree), "-B", str(folder), *generator, *cmake_args(),
         f"-DCMAKE_PROJECT_INCLUDE={folder / 'leave-out-variants.cmake'}"],
        logs / f"{ARCH}-configure.log",
        hint="Needs Debian's cross compiler: apt-get install " + " ".join(sorted(set(NEEDS.values()))),
    )
    targets = ["ggml-rpc-server", "ggml-rpc", *(f"ggml-cpu-{variant}" for variant in CPU_VARIANTS)]
    sources.run_step(
        f"build ggml-rpc-server for {ARCH} with {len(CPU_VARIANTS)} ARM CPU variants (4 to 6 min on 2 cores)",
        ["cmake", "--build", str(folder), "--parallel", str(jobs), "--target", *targets],
        logs / f"{ARCH}-build.log",
    )
    return folder / "bin"


def arm_bundle(cache: Path, jobs: int) -> Path:
    """The aarch64 bundle's manifest for the pinned llama-cpp-python, built first if missing."""
    version = build_llama.pinned_version()
    cache = cache / f"{sources.PACKAGE}-{version}"
    manifest = runtime_dir(cache) / f"{build_llama.BUNDLE_NAME}.json"
    if manifest.exists():
        return manifest
    lacking = missing()
    if lacking:
        raise SystemExit(f"The {ARCH} runtime needs Debian's cross compiler: run `make arm` (it installs it) or "
                         "apt-get install " + " ".join(lacking))
    logs = cache / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    with open(cache / ".lock", "w") as lock:  # the usual build's lock, while the source is fetched and unpacked
        fcntl.flock(lock, fcntl.LOCK_EX)
        source = sources.unpack(sources.fetch_sdist(version, cache, logs), cache, logs)
    # Its own lock for the compiling: `make run` may take the usual one meanwhile without waiting.
    with open(cache / f".{ARCH}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if manifest.exists():
            return manifest
        built = build(source / "vendor" / "llama.cpp", cache, logs, jobs)
        sources.say(f"pack the {ARCH} runtime bundle")
        made = build_llama.bundle_runtime(source, built, cache, version, arch=ARCH, cpu_variants=CPU_VARIANTS,
                                          cross=CROSS, final=runtime_dir(cache))
        shutil.rmtree(built.parent, ignore_errors=True)
        return made


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    default_cache = os.environ.get("CLUSTERPANEL_CACHE", str(Path.home() / ".cache" / "clusterpanel"))
    parser.add_argument("--cache", type=Path, default=Path(default_cache))
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    args = parser.parse_args()
    try:
        manifest = arm_bundle(args.cache.expanduser(), args.jobs)
    except sources.StepFailed as failure:
        sources.tell_failure(failure)
        return 1
    sources.say(f"{ARCH} runtime bundle: {manifest}")
    print(manifest)
    return 0


if __name__ == "__main__":
    sys.exit(main())
