"""Each laptop gets the bundle of its own architecture: the head's (x86-64, its Vulkan one where built) by
default, the aarch64 one for ARM laptops (arm64 as macOS and some distributions say it) when it was built from
the head's own source, and otherwise words that name the architecture and what builds a bundle for it.

The bundles here are manifests and tarballs written by the test in a build cache of its own, shaped as
scripts/build_llama.py, build_vulkan.py and build_arm.py write them."""

import json
import os
import time
from importlib import metadata

import pytest

from nodes.runtime import install
from nodes.runtime.bundle import RuntimeNotFound, find_bundle

SOURCE = {"llama_cpp_python": metadata.version("llama-cpp-python"), "llama_cpp_commit": "4227c9b",
          "llama_cpp_patches": ["0001-a.patch"], "rpc_protocol": "3.0.0"}


@pytest.fixture
def cache(tmp_path, settings, monkeypatch):
    monkeypatch.delenv("RUNTIME_MANIFEST", raising=False)
    settings.BUILD_CACHE_DIR = tmp_path
    folder = tmp_path / f"llama-cpp-python-{SOURCE['llama_cpp_python']}"
    folder.mkdir()
    return folder


def bundle(cache, folder: str, arch: str, age: int, **more) -> None:
    """A bundle built `age` minutes ago."""
    path = cache / folder
    path.mkdir()
    (path / f"{folder}.tar.gz").write_bytes(b"bundle")
    manifest = {**SOURCE, "name": "clusterpanel-runtime", "os": "linux", "arch": arch, "tarball": f"{folder}.tar.gz",
                "sha256": folder.ljust(64, "0"), "size": 6, "min_glibc": "2.34", "min_glibcxx": "3.4.30", **more}
    (path / "clusterpanel-runtime.json").write_text(json.dumps(manifest))
    when = time.time() - age * 60
    os.utime(path / "clusterpanel-runtime.json", (when, when))


def test_it_gives_x86_laptops_the_vulkan_bundle_and_arm_laptops_the_aarch64_one(cache):
    bundle(cache, "runtime-plain", "x86_64", age=30)
    bundle(cache, "runtime-arm-aarch64", "aarch64", age=20)
    bundle(cache, "runtime-plain-vulkan", "x86_64", age=25, gpu_backends={"vulkan": "gpu/libggml-vulkan.so"})
    assert find_bundle().tarball.name == "runtime-plain-vulkan.tar.gz"
    assert find_bundle("x86_64").tarball.name == "runtime-plain-vulkan.tar.gz"
    assert find_bundle("aarch64").tarball.name == "runtime-arm-aarch64.tar.gz"
    assert find_bundle("arm64").tarball.name == "runtime-arm-aarch64.tar.gz"
    assert install.bundle_for({"os": "Linux", "arch": "aarch64"}).manifest["arch"] == "aarch64"


def test_an_aarch64_bundle_of_another_source_is_not_given(cache):
    bundle(cache, "runtime-plain", "x86_64", age=30)
    bundle(cache, "runtime-old-aarch64", "aarch64", age=90, llama_cpp_patches=[])
    with pytest.raises(RuntimeNotFound) as missing:
        find_bundle("aarch64")
    assert str(missing.value) == (f"No runtime bundle for aarch64 laptops from llama-cpp-python "
                                  f"{SOURCE['llama_cpp_python']}: `make arm` on the head builds one.")


def test_a_laptop_with_no_bundle_of_its_own_is_told_what_would_build_one(cache):
    bundle(cache, "runtime-plain", "x86_64", age=30)
    arm = {"os": "Linux", "arch": "aarch64"}
    head = install.bundle_for(arm)
    assert head.manifest["arch"] == "x86_64"  # the head's, which install refuses for it in these words:
    assert install.problems(arm, head.manifest) == [
        "its CPU is aarch64; the runtime is built for x86_64, and `make arm` on the head builds the aarch64 one"]
    assert install.problems({"os": "Linux", "arch": "riscv64"}, head.manifest) == [
        "its CPU is riscv64; the runtime is built for x86_64, and prebuilt runtimes are for x86_64 and aarch64 "
        "laptops only"]
    with pytest.raises(RuntimeNotFound, match="No runtime bundle for riscv64 laptops .*: prebuilt ones are for "
                                              "x86_64 and aarch64 laptops only"):
        find_bundle("riscv64")


def test_a_gpu_bundle_made_from_an_older_build_gives_way_to_the_newer_plain_one(cache):
    """Build flags changed since the Vulkan bundle was made (same source, so same_source cannot tell): the newer
    plain bundle is given until a Vulkan one is made from it. A manifest left half written is no bundle."""
    vulkan = {"gpu_backends": {"vulkan": "gpu/libggml-vulkan.so"}}
    bundle(cache, "runtime-old", "x86_64", age=60, files={"bin/ggml-rpc-server": "aa"})
    bundle(cache, "runtime-old-vulkan", "x86_64", age=50, **vulkan,
           files={"bin/ggml-rpc-server": "aa", "gpu/libggml-vulkan.so": "vv"})
    bundle(cache, "runtime-new", "x86_64", age=10, files={"bin/ggml-rpc-server": "bb"})
    (cache / "runtime-broken").mkdir()
    (cache / "runtime-broken" / "clusterpanel-runtime.json").write_text('{"arch": "x86_')
    assert find_bundle().tarball.name == "runtime-new.tar.gz"
    bundle(cache, "runtime-new-vulkan", "x86_64", age=5, **vulkan,
           files={"bin/ggml-rpc-server": "bb", "gpu/libggml-vulkan.so": "vv"})
    assert find_bundle().tarball.name == "runtime-new-vulkan.tar.gz"


def test_a_32_bit_system_on_a_64_bit_kernel_is_refused_in_words(cache):
    bundle(cache, "runtime-plain", "x86_64", age=30)
    bundle(cache, "runtime-arm-aarch64", "aarch64", age=20)
    pi = {"os": "Linux", "arch": "aarch64", "userland_bits": 32}  # Raspberry Pi OS 32-bit on a Pi 5
    assert install.problems(pi, install.bundle_for(pi).manifest) == [
        "its system is 32-bit on an aarch64 kernel (as Raspberry Pi OS 32-bit is); the prebuilt runtimes are 64-bit: "
        "install the 64-bit system, or build the runtime here"]
