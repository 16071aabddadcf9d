"""The laptop runtime bundle (ggml-rpc-server and its libraries) built by scripts/build_llama.py."""

import json
import os
import platform
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from django.conf import settings

MANIFEST_NAME = "clusterpanel-runtime.json"
# The most laptops one deployment can span: one RPC device each, as many as llama_max_devices() of the build
# (scripts/llama_patches/0001-devices-past-16.patch raises upstream's 16). The planner never offers more;
# tests/jobs/engine/test_device_limit.py checks the built library agrees.
MAX_LAPTOPS = 64
# One name per architecture: macOS and some distributions say arm64, Windows says AMD64.
ARCH_NAMES = {"arm64": "aarch64", "amd64": "x86_64"}
# Architectures with a prebuilt bundle, and what builds it on the head (scripts/build_llama.py, scripts/build_arm.py).
PREBUILT = {"x86_64": "`make setup`", "aarch64": "`make arm`"}
# Bundles built from one source: laptops of every architecture speak the head's RPC protocol.
SOURCE_KEYS = ("llama_cpp_python", "llama_cpp_commit", "llama_cpp_patches", "rpc_protocol")


class RuntimeNotFound(RuntimeError):
    pass


class Manifested:
    """Something the head's build made, described by its manifest (a dict field of the dataclass)."""

    manifest: dict

    @property
    def sha256(self) -> str:
        return self.manifest["sha256"]

    @property
    def rpc_protocol(self) -> str:
        return self.manifest["rpc_protocol"]


@dataclass(frozen=True)
class RuntimeBundle(Manifested):
    tarball: Path
    manifest: dict

    @property
    def gpu_backends(self) -> dict[str, str]:
        """GPU backends in the bundle, loaded only by servers that use them: {"vulkan": "gpu/libggml-vulkan.so"}."""
        return self.manifest.get("gpu_backends", {})

    @property
    def summary(self) -> str:
        m = self.manifest
        return (f"llama.cpp {m['llama_cpp_commit']}, RPC protocol {m['rpc_protocol']}, "
                f"{m['os']}/{m['arch']}, glibc ≥ {m['min_glibc']}, {m['size'] / 2**20:.1f} MiB"
                + "".join(f", {name.capitalize()}" for name in self.gpu_backends))

    @classmethod
    def from_manifest(cls, path: Path) -> "RuntimeBundle":
        manifest = json.loads(path.read_text())
        tarball = path.parent / manifest["tarball"]
        if not tarball.is_file():
            raise RuntimeNotFound(f"{path} names {tarball.name}, which is missing: run `make setup`.")
        return cls(tarball, manifest)


def cache_dir() -> Path:
    """scripts/build_llama.py's cache for the llama-cpp-python the panel runs (its source, builds, bundles)."""
    try:
        version = metadata.version("llama-cpp-python")
    except metadata.PackageNotFoundError:
        raise RuntimeNotFound("llama-cpp-python is not installed: run `make setup`.") from None
    return settings.BUILD_CACHE_DIR / f"llama-cpp-python-{version}"


def machine(arch: str | None) -> str:
    """The architecture's one name (aarch64 for arm64), "" when unknown."""
    arch = (arch or "").strip().lower()
    return ARCH_NAMES.get(arch, arch)


def find_bundle(arch: str | None = None) -> RuntimeBundle:
    """The bundle for laptops of `arch` (the head's own by default) built from the same llama-cpp-python the panel
    runs: of the newest build, the one with a GPU backend where both are there (RUNTIME_MANIFEST overrides)."""
    if os.environ.get("RUNTIME_MANIFEST"):
        return RuntimeBundle.from_manifest(Path(os.environ["RUNTIME_MANIFEST"]))
    cache = cache_dir()
    version = cache.name.rpartition("-")[2]
    head = newest(cache, machine(platform.machine()))
    if head is None:
        raise RuntimeNotFound(
            f"No runtime bundle for llama-cpp-python {version} in {settings.BUILD_CACHE_DIR}: run `make setup`."
        )
    wanted = machine(arch) or machine(platform.machine())
    found = head if wanted == machine(platform.machine()) else newest(cache, wanted, like=head[1])
    if found is None:
        builds = f"{PREBUILT[wanted]} on the head builds one" if wanted in PREBUILT else (
            f"prebuilt ones are for {' and '.join(PREBUILT)} laptops only")
        raise RuntimeNotFound(f"No runtime bundle for {wanted or 'this'} laptops from llama-cpp-python {version}: "
                              f"{builds}.")
    return RuntimeBundle.from_manifest(found[0])


def newest(cache: Path, arch: str, like: dict | None = None) -> tuple[Path, dict] | None:
    """The manifest of the newest bundle for `arch` (built from the source of `like`, if given), preferring among
    those of its source one with GPU backends; and what it says."""
    found = []
    for path in sorted(cache.glob(f"runtime-*/{MANIFEST_NAME}"), key=lambda p: p.stat().st_mtime):
        try:
            manifest = json.loads(path.read_text())
        except (OSError, ValueError):  # a leftover half written or removed meanwhile: not a bundle
            continue
        if machine(manifest.get("arch")) == arch and (like is None or same_source(manifest, like)):
            found.append((path, manifest))
    if not found:
        return None
    latest = [entry for entry in found if same_source(entry[1], found[-1][1])]
    plain = next((entry for entry in reversed(latest) if not entry[1].get("gpu_backends")), latest[-1])
    # A GPU bundle is the plain one with its backend added: one made from an older plain build (other build
    # flags, same source) must not win over the newer plain build.
    return next((entry for entry in reversed(latest) if entry[1].get("gpu_backends") and extends(entry[1], plain[1])),
                plain)


def extends(gpu: dict, plain: dict) -> bool:
    files = gpu.get("files") or {}
    return all(files.get(name) == digest for name, digest in (plain.get("files") or {}).items())


def same_source(one: dict, other: dict) -> bool:
    return all(one.get(key) == other.get(key) for key in SOURCE_KEYS)
