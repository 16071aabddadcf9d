"""The laptop runtime bundle (ggml-rpc-server and its libraries) built by scripts/build_llama.py."""

import json
import os
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from django.conf import settings

MANIFEST_NAME = "clusterpanel-runtime.json"
# The most laptops one deployment can span: one RPC device each, as many as llama_max_devices() of the build
# (scripts/llama_patches/0001-devices-past-16.patch raises upstream's 16). The planner never offers more;
# tests/jobs/test_device_limit.py checks the built library agrees.
MAX_LAPTOPS = 64


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


def find_bundle() -> RuntimeBundle:
    """The bundle built from the same llama-cpp-python the panel runs (RUNTIME_MANIFEST overrides)."""
    if os.environ.get("RUNTIME_MANIFEST"):
        return RuntimeBundle.from_manifest(Path(os.environ["RUNTIME_MANIFEST"]))
    cache = cache_dir()
    found = sorted(cache.glob(f"runtime-*/{MANIFEST_NAME}"), key=lambda p: p.stat().st_mtime)
    if not found:
        version = cache.name.rpartition("-")[2]
        raise RuntimeNotFound(
            f"No runtime bundle for llama-cpp-python {version} in {settings.BUILD_CACHE_DIR}: run `make setup`."
        )
    return RuntimeBundle.from_manifest(found[-1])
