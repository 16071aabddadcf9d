#!/usr/bin/env python3
"""Build llama.cpp with RPC, once per version, into a cache outside the work tree.

One CMake build of the vendored llama.cpp in one llama-cpp-python source
distribution serves two products:

* the laptop runtime bundle: `ggml-rpc-server` with its ggml libraries and one
  CPU backend per instruction-set level, chosen at run time, so it runs on old
  laptops and still uses AVX2/AVX-512 where present;
* the head's llama-cpp-python wheel: the package's Python code (built with its
  own libraries off, in seconds) with `libllama` and the same ggml libraries
  and CPU backends added to `llama_cpp/lib`. Head and laptops thus run the very
  same ggml and speak one RPC protocol version, and ggml is compiled once
  (models_app/llamacpp/libllama.py loads the CPU backend that fits the head's CPU).

One more product only on request (`--llama-server`), for the benchmarks:
llama.cpp's own `llama-server`, built from the same vendored tree with RPC on,
as the anchor the panel's engine is measured against. It needs the source
distribution already fetched by the usual build, and downloads nothing.

Stdlib only: this runs before the virtualenv has anything installed.
Prints the wheel path on the last line of stdout. On failure: the step that
failed and its log, never a traceback.
"""

import argparse
import base64
import csv
import fcntl
import hashlib
import io
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path

try:
    from scripts import llama_source as sources  # imported as scripts.build_llama (tests, benchmarks)
except ImportError:
    import llama_source as sources  # run as scripts/build_llama.py: its own folder comes first on sys.path

ROOT = Path(__file__).resolve().parent.parent
# The wheel's own CMake build makes nothing: its libraries come from the shared build below (and the panel
# uses no multimodal model, so no libmtmd).
WHEEL_CMAKE_ARGS = "-DLLAMA_BUILD=OFF -DLLAVA_BUILD=OFF"
# One CPU backend per level a laptop may have; the best one it supports is loaded.
CPU_VARIANTS = [
    "x64", "sse42", "sandybridge", "ivybridge", "piledriver", "haswell", "skylakex",
    "cannonlake", "cascadelake", "icelake", "cooperlake", "zen4", "alderlake", "sapphirerapids",
]
# The one build of the vendored llama.cpp, for the bundle and the wheel alike.
LLAMA_CPP_CMAKE_ARGS = [
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=ON",
    "-DGGML_RPC=ON",
    "-DGGML_NATIVE=OFF",
    "-DGGML_BACKEND_DL=ON",
    "-DGGML_CPU_ALL_VARIANTS=ON",
    "-DLLAMA_CURL=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_SERVER=OFF",
    "-DLLAMA_BUILD_APP=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DCMAKE_BUILD_WITH_INSTALL_RPATH=ON",
    "-DCMAKE_INSTALL_RPATH=$ORIGIN",
]
# Beside glibc and libstdc++, what a laptop may lack: shipped in the bundle. The
# laptop's own libstdc++ is used: this machine's, shipped or linked in, would
# raise the glibc a laptop needs from 2.34 to 2.36 (arc4random, _dl_find_object).
BUNDLED_SYSTEM_LIBS = ("libgomp.so",)
# What the head needs beside the bundle's libraries (the rpc-server does not use libllama): libllama,
# libllama-common and the panel's door to llama.cpp's chat layer, built from CHAT_SOURCE.
CHAT_LIBRARY = "libclusterpanel-chat.so"
CHAT_SOURCE = ROOT / "scripts" / "llama_chat" / "chat.cpp"
HEAD_ONLY_LIBS = ("libllama", "libclusterpanel-chat")
BUNDLE_NAME = "clusterpanel-runtime"
# Native CPU code and OpenMP, as fast here as the head's best CPU variant
# (bench/head_build.py): the benchmark compares engines, not instruction sets.
# Static, so the binary stands alone; the prebuilt web UI would be downloaded,
# so it stays off.
LLAMA_SERVER_CMAKE_ARGS = [
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DGGML_RPC=ON",
    "-DLLAMA_CURL=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_TOOLS=ON",
    "-DLLAMA_BUILD_SERVER=ON",
    "-DLLAMA_BUILD_APP=OFF",
    "-DLLAMA_BUILD_UI=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
]


def pinned_version() -> str:
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        match = re.match(rf"^{re.escape(sources.PACKAGE)}==([\w.]+)", line.strip())
        if match:
            return match.group(1)
    raise SystemExit(f"requirements.txt does not pin {sources.PACKAGE}==<version>")


def flags_key(*flags: object) -> str:
    """Changing a build flag or a patch changes the folder, so a stale build is never reused."""
    return hashlib.sha256(json.dumps([flags, sources.patches_key()]).encode()).hexdigest()[:10]


def build_python_wheel(source: Path, staging: Path, logs: Path) -> Path:
    """llama-cpp-python's Python code, with no library of its own yet."""
    env = {**os.environ, "CMAKE_ARGS": WHEEL_CMAKE_ARGS}
    sources.run_step(
        "build the llama-cpp-python wheel (its Python code)",
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(staging), str(source)],
        logs / "wheel.log", env=env,
        hint="Needs a C/C++ compiler, cmake and the Python headers (make setup installs them).",
    )
    return next(staging.glob("llama_cpp_python-*.whl"))


def build_llama_cpp(source: Path, cache: Path, logs: Path, jobs: int) -> Path:
    build = rpc_build_dir(cache)
    tree = source / "vendor" / "llama.cpp"
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    sources.run_step(
        "configure llama.cpp from the vendored tree (one build for the head and the laptops)",
        ["cmake", "-S", str(tree), "-B", str(build), *generator, *LLAMA_CPP_CMAKE_ARGS],
        logs / "rpc-configure.log",
    )
    targets = ["llama", "llama-common", "ggml-rpc-server", "ggml-rpc", *(f"ggml-cpu-{v}" for v in CPU_VARIANTS)]
    sources.run_step(
        f"build libllama, its chat layer and ggml-rpc-server with {len(CPU_VARIANTS)} CPU variants "
        "(8 to 10 min on 2 cores)",
        ["cmake", "--build", str(build), "--parallel", str(jobs), "--target", *targets],
        logs / "rpc-build.log",
    )
    build_chat_door(tree, build / "bin", logs)
    return build / "bin"


def build_chat_door(tree: Path, built: Path, logs: Path) -> None:
    """libclusterpanel-chat.so: scripts/llama_chat/chat.cpp, a C door to llama.cpp's common/ chat layer (templates
    with tools, tool-call parsers, JSON schema to grammar), linked to this build's libllama-common and libllama."""
    includes = [f"-I{tree / folder}" for folder in ("common", "include", "ggml/include", "vendor")]
    sources.run_step(
        "build the panel's door to llama.cpp's chat layer (scripts/llama_chat/chat.cpp)",
        [os.environ.get("CXX", "c++"), "-O2", "-std=c++17", "-shared", "-fPIC", *includes, str(CHAT_SOURCE),
         f"-L{built}", "-lllama-common", "-lllama", "-Wl,-rpath,$ORIGIN", "-o", str(built / CHAT_LIBRARY)],
        logs / "chat-build.log",
    )


def library_files(built: Path, prefixes: tuple[str, ...]) -> dict[str, Path]:
    """Each library file in `built` whose name starts with one of `prefixes`, under every name it is known by
    (libggml.so, libggml.so.0, libggml.so.0.25.3): a wheel keeps no symlinks, so each name becomes a copy."""
    found = {}
    for path in sorted(built.glob("lib*.so*")):
        if path.name.startswith(prefixes):
            found[path.name] = path.resolve()
    return found


def record_line(name: str, data: bytes) -> list[str]:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return [name, f"sha256={digest}", str(len(data))]


def add_libraries(python_wheel: Path, built: Path, final: Path) -> Path:
    """The wheel with the shared build's libraries in llama_cpp/lib, its RECORD rewritten to list them."""
    libraries = library_files(built, ("libggml", *HEAD_ONLY_LIBS))
    staging = final.with_name(final.name + ".partial")
    staging.unlink(missing_ok=True)
    records = []
    with zipfile.ZipFile(python_wheel) as source, \
            zipfile.ZipFile(staging, "w", zipfile.ZIP_DEFLATED) as wheel:
        record_name = next(n for n in source.namelist() if n.endswith(".dist-info/RECORD"))
        for info in source.infolist():
            if info.filename == record_name:
                continue
            data = source.read(info)
            wheel.writestr(info, data)
            records.append(record_line(info.filename, data))
        for name, path in libraries.items():
            data = path.read_bytes()
            info = zipfile.ZipInfo(f"llama_cpp/lib/{name}", date_time=time.gmtime(path.stat().st_mtime)[:6])
            info.external_attr = 0o755 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            wheel.writestr(info, data)
            records.append(record_line(info.filename, data))
        lines = io.StringIO()
        csv.writer(lines, lineterminator="\n").writerows([*records, [record_name, "", ""]])
        wheel.writestr(record_name, lines.getvalue())
    staging.rename(final)
    return final


def system_lib(name: str, binary: Path, cross: str = "") -> Path | None:
    """Where the dynamic linker finds `name` for `binary` on this machine; for a cross build (`cross`: the tools'
    prefix, aarch64-linux-gnu-), where the cross compiler keeps it (ldd cannot read another architecture)."""
    if cross:
        found = subprocess.run([f"{cross}gcc", f"-print-file-name={name}.1"], capture_output=True, text=True)
        path = Path(found.stdout.strip())
        return path if path.is_absolute() and path.exists() else None
    output = subprocess.run(["ldd", str(binary)], capture_output=True, text=True).stdout
    for line in output.splitlines():
        parts = line.split()
        if parts and parts[0].startswith(name) and "=>" in parts and len(parts) > 2:
            return Path(parts[2])
    return None


def newest_needed(files: list[Path], prefix: str, cross: str = "") -> str:
    """The newest symbol version named `prefix`x.y that any of `files` asks for (e.g. GLIBC_2.34)."""
    needed = [(0,)]
    for path in files:
        output = subprocess.run([f"{cross}objdump", "-T", str(path)], capture_output=True, text=True).stdout
        for match in re.finditer(rf"\({prefix}(\d+(?:\.\d+)+)\)", output):
            needed.append(tuple(int(x) for x in match.group(1).split(".")))
    return ".".join(str(x) for x in max(needed))


def bundle_runtime(source: Path, built: Path, cache: Path, version: str, arch: str = platform.machine(),
                   cpu_variants: list[str] = CPU_VARIANTS, cross: str = "", final: Path | None = None) -> Path:
    """The bundle in `final` (the host's runtime folder unless given); its manifest. A cross build (scripts/
    build_arm.py) names its architecture, its CPU variants and its tools' prefix."""
    staging = Path(tempfile.mkdtemp(prefix="runtime-", dir=cache))
    bin_dir = staging / BUNDLE_NAME / "bin"
    bin_dir.mkdir(parents=True)
    server = built / "ggml-rpc-server"
    shutil.copy2(server, bin_dir)
    for lib in sorted(built.glob("lib*.so*")):
        if lib.is_symlink() or lib.name.startswith(HEAD_ONLY_LIBS):
            continue
        shutil.copy2(lib, bin_dir / lib.name)
        soname = re.match(r"(lib[\w.-]+?\.so(?:\.\d+)?)", lib.name).group(1)  # armv8.2_1: dots
        for alias in {soname, re.sub(r"\.so.*", ".so", lib.name)} - {lib.name}:
            (bin_dir / alias).symlink_to(lib.name)
    for name in BUNDLED_SYSTEM_LIBS:
        for user in [server, *built.glob("libggml*.so")]:
            found = system_lib(name, user, cross)
            if found:
                shutil.copy2(found.resolve(), bin_dir / found.name)
                break
    files = sorted(p for p in bin_dir.iterdir() if not p.is_symlink())
    tree = source / "vendor" / "llama.cpp"
    manifest = {
        "name": BUNDLE_NAME,
        "llama_cpp_python": version,
        "llama_cpp_commit": sources.llama_commit(source, version),
        "rpc_protocol": sources.rpc_protocol(tree),
        "llama_cpp_patches": [patch.name for patch in sources.patches()],
        "os": "linux",
        "arch": arch,
        "min_glibc": newest_needed(files, "GLIBC_", cross),
        "min_glibcxx": newest_needed(files, "GLIBCXX_", cross),
        "cpu_variants": cpu_variants,
        "binary": "bin/ggml-rpc-server",
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "files": {f"bin/{p.name}": sources.sha256_of(p) for p in files},
    }
    (staging / BUNDLE_NAME / "manifest.json").write_text(json.dumps(manifest, indent=2))
    tarball = staging / f"{BUNDLE_NAME}-{version}-linux-{arch}.tar.gz"
    with tarfile.open(tarball, "w:gz") as archive:
        archive.add(staging / BUNDLE_NAME, arcname=BUNDLE_NAME)
    manifest["tarball"] = tarball.name
    manifest["sha256"] = sources.sha256_of(tarball)
    manifest["size"] = tarball.stat().st_size
    (staging / f"{BUNDLE_NAME}.json").write_text(json.dumps(manifest, indent=2))
    shutil.rmtree(staging / BUNDLE_NAME)
    final = final or runtime_dir(cache)
    staging.rename(final)
    return final / f"{BUNDLE_NAME}.json"


def rpc_build_dir(cache: Path) -> Path:
    """Per set of patches: CMake refuses a build folder configured from another source folder."""
    return cache / f"rpc-build-{sources.patches_key()}"


def runtime_dir(cache: Path) -> Path:
    return cache / f"runtime-{flags_key(LLAMA_CPP_CMAKE_ARGS, CPU_VARIANTS, BUNDLED_SYSTEM_LIBS)}"


def llama_server_dir(cache: Path) -> Path:
    return cache / f"llama-server-{flags_key(LLAMA_SERVER_CMAKE_ARGS)}"


def build_llama_server(source: Path, cache: Path, logs: Path, jobs: int) -> Path:
    build = cache / f"llama-server-build-{sources.patches_key()}"
    tree = source / "vendor" / "llama.cpp"
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    sources.run_step(
        "configure llama-server from the vendored llama.cpp",
        ["cmake", "-S", str(tree), "-B", str(build), *generator, *LLAMA_SERVER_CMAKE_ARGS],
        logs / "llama-server-configure.log",
    )
    sources.run_step(
        "build llama-server (15 to 25 min on 2 cores)",
        ["cmake", "--build", str(build), "--parallel", str(jobs), "--target", "llama-server"],
        logs / "llama-server-build.log",
    )
    staging = Path(tempfile.mkdtemp(prefix="llama-server-", dir=cache))
    shutil.copy2(build / "bin" / "llama-server", staging / "llama-server")
    staging.rename(llama_server_dir(cache))
    shutil.rmtree(build, ignore_errors=True)
    return llama_server_dir(cache) / "llama-server"


def local_source(cache: Path) -> Path:
    """The vendored tree from the sdist the usual build fetched; never downloads."""
    version = cache.name.removeprefix(f"{sources.PACKAGE}-")
    if not list((cache / "sdist").glob(f"llama_cpp_python-{version}.tar.gz")):
        raise SystemExit(f"No llama-cpp-python {version} source in {cache}: run `make setup` first.")
    with open(cache / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return sources.unpack(sources.fetch_sdist(version, cache, cache / "logs"), cache, cache / "logs")


def llama_server(cache_root: Path | None = None, jobs: int | None = None) -> Path:
    """The benchmarks' llama-server binary, built first if missing (cached per version and flags)."""
    cache_root = cache_root or Path(os.environ.get("CLUSTERPANEL_CACHE", Path.home() / ".cache" / "clusterpanel"))
    cache = cache_root.expanduser() / f"{sources.PACKAGE}-{pinned_version()}"
    binary = llama_server_dir(cache) / "llama-server"
    if binary.exists():
        return binary
    source = local_source(cache)
    logs = cache / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    # Its own lock: `make run` may take the usual one meanwhile without waiting 15 minutes.
    with open(cache / ".llama-server.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if binary.exists():
            return binary
        return build_llama_server(source, cache, logs, jobs or os.cpu_count() or 2)


def build_all(cache_root: Path, jobs: int) -> tuple[Path, Path]:
    version = pinned_version()
    cache = cache_root / f"{sources.PACKAGE}-{version}"
    logs = cache / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    with open(cache / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a second build waits for the first
        wheels = wheel_dir(cache)
        runtime = runtime_dir(cache) / f"{BUNDLE_NAME}.json"
        found = sorted(wheels.glob("llama_cpp_python-*.whl"))
        if found and runtime.exists():
            return found[0], runtime
        sdist = sources.fetch_sdist(version, cache, logs)
        source = sources.unpack(sdist, cache, logs)
        staging = Path(tempfile.mkdtemp(prefix="wheel-", dir=cache))
        try:
            python_wheel = build_python_wheel(source, staging, logs)
            built = build_llama_cpp(source, cache, logs, jobs)
            if not runtime.exists():
                runtime = bundle_runtime(source, built, cache, version)
            wheels.mkdir(exist_ok=True)
            wheel = add_libraries(python_wheel, built, wheels / python_wheel.name)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        shutil.rmtree(rpc_build_dir(cache), ignore_errors=True)
    return wheel, runtime


def wheel_dir(cache: Path) -> Path:
    chat = hashlib.sha256(CHAT_SOURCE.read_bytes()).hexdigest()
    return cache / f"wheel-{flags_key(WHEEL_CMAKE_ARGS, LLAMA_CPP_CMAKE_ARGS, CPU_VARIANTS, HEAD_ONLY_LIBS, chat)}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    default_cache = os.environ.get("CLUSTERPANEL_CACHE", str(Path.home() / ".cache" / "clusterpanel"))
    parser.add_argument("--cache", type=Path, default=Path(default_cache))
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--print", choices=["wheel", "runtime"], default="wheel")
    parser.add_argument("--vulkan", action="store_true",
                        help="also build llama.cpp's Vulkan backend into the laptops' bundle (scripts/build_vulkan.py)")
    parser.add_argument("--llama-server", action="store_true",
                        help="only build llama.cpp's own server for the benchmarks and print its path")
    args = parser.parse_args()
    try:
        if args.llama_server:
            print(llama_server(args.cache, args.jobs))
            return 0
        wheel, runtime = build_all(args.cache.expanduser(), args.jobs)
        if args.vulkan:
            try:
                from scripts import build_vulkan
            except ImportError:
                import build_vulkan
            key = flags_key(LLAMA_CPP_CMAKE_ARGS, CPU_VARIANTS, BUNDLED_SYSTEM_LIBS, build_vulkan.CMAKE_FLAG)
            runtime = build_vulkan.bundle_with_vulkan(runtime.parent.parent, runtime, LLAMA_CPP_CMAKE_ARGS, key,
                                                      args.jobs)
    except sources.StepFailed as failure:
        sources.tell_failure(failure)
        return 1
    sources.say(f"runtime bundle: {runtime}")
    print(wheel if args.print == "wheel" else runtime)
    return 0


if __name__ == "__main__":
    sys.exit(main())
