"""The laptop runtime bundle with llama.cpp's Vulkan backend added: GPUs of every maker, where a driver is.

ggml loads its backends at run time (GGML_BACKEND_DL). `libggml-vulkan.so` goes in the bundle's gpu/
folder, not beside the CPU variants in bin/, so a server loads it only when told to
(GGML_BACKEND_PATH): on a laptop with a Vulkan loader, merely loading it costs 63 MB of RAM even when
no GPU is used (its instance, the drivers' libraries). Loaded on a laptop with a Vulkan driver (NVIDIA,
AMD, Intel; Mesa's lavapipe in the tests) it shows a Vulkan device; elsewhere it fails to load, quietly.

The backend is compiled from the same patched tree as the bundle, against the same ggml, in a build
folder of its own (only the `ggml-vulkan` target: about 2 minutes on 2 cores, most of it compiling
shaders), then added to a copy of the plain bundle. It is optional: `make run` does not wait for it;
`make vulkan` and `make test` build it. It needs glslc, the Vulkan headers and SPIRV-Headers
(Debian/Ubuntu: glslc libvulkan-dev spirv-headers).

Stdlib only.
"""

import fcntl
import json
import shutil
import tarfile
import tempfile
import time
from pathlib import Path

try:
    from scripts import llama_source as sources
except ImportError:
    import llama_source as sources

LIBRARY = "libggml-vulkan.so"
CMAKE_FLAG = "-DGGML_VULKAN=ON"
NEEDS = {  # what the build needs → the Debian/Ubuntu package with it
    "glslc": "glslc",
    "/usr/include/vulkan/vulkan.hpp": "libvulkan-dev",
    "/usr/share/cmake/SPIRV-Headers/SPIRV-HeadersConfig.cmake": "spirv-headers",
}


def missing() -> list[str]:
    """Debian packages the Vulkan build lacks on this machine."""
    lacking = []
    for need, package in NEEDS.items():
        found = Path(need).exists() if need.startswith("/") else shutil.which(need)
        if not found:
            lacking.append(package)
    return lacking


def build_backend(tree: Path, cache: Path, logs: Path, jobs: int, cmake_args: list[str], key: str) -> Path:
    """libggml-vulkan.so for `tree`, compiled once per key into cache/vulkan-<key>/."""
    done = cache / f"vulkan-{key}" / LIBRARY
    if done.exists():
        return done
    build = cache / f"vulkan-build-{key}"
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    sources.run_step(
        "configure llama.cpp's Vulkan backend (same tree and flags as the bundle)",
        ["cmake", "-S", str(tree), "-B", str(build), *generator, *cmake_args, CMAKE_FLAG],
        logs / "vulkan-configure.log",
        hint="Needs glslc, the Vulkan headers and SPIRV-Headers: apt-get install glslc libvulkan-dev spirv-headers",
    )
    sources.run_step(
        "build llama.cpp's Vulkan backend (about 2 min on 2 cores, mostly shaders)",
        ["cmake", "--build", str(build), "--parallel", str(jobs), "--target", "ggml-vulkan"],
        logs / "vulkan-build.log",
    )
    staging = Path(tempfile.mkdtemp(prefix="vulkan-", dir=cache))
    shutil.copy2(build / "bin" / LIBRARY, staging / LIBRARY)
    staging.rename(done.parent)
    shutil.rmtree(build, ignore_errors=True)
    return done


def add_to_bundle(manifest_path: Path, library: Path, final: Path) -> Path:
    """A copy of the bundle at `manifest_path` with `library` in its gpu/, under `final`; its manifest."""
    manifest = json.loads(manifest_path.read_text())
    plain_tarball = manifest["tarball"]
    staging = Path(tempfile.mkdtemp(prefix="runtime-vulkan-", dir=final.parent))
    with tarfile.open(manifest_path.parent / plain_tarball) as archive:
        sources.extract_all(archive, staging)
    root = staging / manifest["name"]
    (root / "gpu").mkdir()
    shutil.copy2(library, root / "gpu" / library.name)
    manifest["files"] = {**manifest["files"], f"gpu/{library.name}": sources.sha256_of(library)}
    manifest["gpu_backends"] = {"vulkan": f"gpu/{library.name}"}
    manifest["built_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    for key in ("tarball", "sha256", "size"):
        manifest.pop(key, None)
    (root / "manifest.json").write_text(json.dumps(manifest, indent=2))
    tarball = staging / plain_tarball.replace(".tar.gz", "-vulkan.tar.gz")
    with tarfile.open(tarball, "w:gz") as archive:
        archive.add(root, arcname=manifest["name"])
    manifest.update(tarball=tarball.name, sha256=sources.sha256_of(tarball), size=tarball.stat().st_size)
    (staging / manifest_path.name).write_text(json.dumps(manifest, indent=2))
    shutil.rmtree(root)
    staging.rename(final)
    return final / manifest_path.name


def bundle_with_vulkan(cache: Path, plain: Path, cmake_args: list[str], key: str, jobs: int) -> Path:
    """The manifest of the bundle with Vulkan made from the plain bundle's manifest `plain`, built once per key."""
    final = cache / f"runtime-{key}-vulkan"
    if (final / plain.name).exists():
        return final / plain.name
    lacking = missing()
    if lacking:
        raise SystemExit("The Vulkan backend needs " + " ".join(lacking) + ": run `make vulkan` (it installs them) or "
                         "apt-get install " + " ".join(lacking))
    logs = cache / "logs"
    with open(cache / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (final / plain.name).exists():
            return final / plain.name
        version = cache.name.removeprefix(f"{sources.PACKAGE}-")
        tree = sources.unpack(sources.fetch_sdist(version, cache, logs), cache, logs) / "vendor" / "llama.cpp"
        library = build_backend(tree, cache, logs, jobs, cmake_args, key)
        return add_to_bundle(plain, library, final)
