"""The laptop runtime bundle is one self-contained, verifiable tarball."""

import hashlib
import json
import platform
import subprocess
import tarfile

from django.conf import settings

from scripts.llama_source import extract_all


def test_it_records_what_it_was_built_from(runtime_bundle):
    manifest = runtime_bundle.manifest
    assert manifest["llama_cpp_python"] == __import__("llama_cpp").__version__
    assert len(manifest["llama_cpp_commit"]) >= 7 and manifest["llama_cpp_commit"] != "unknown"
    assert manifest["rpc_protocol"].count(".") == 2
    assert manifest["arch"] == platform.machine()
    assert hashlib.sha256(runtime_bundle.tarball.read_bytes()).hexdigest() == runtime_bundle.sha256


def test_it_holds_every_file_its_manifest_lists(runtime_bundle, tmp_path):
    with tarfile.open(runtime_bundle.tarball) as archive:
        extract_all(archive, tmp_path)
    root = tmp_path / "clusterpanel-runtime"
    inner = json.loads((root / "manifest.json").read_text())
    for name, digest in inner["files"].items():
        assert hashlib.sha256((root / name).read_bytes()).hexdigest() == digest, name
    assert len([n for n in inner["files"] if "libggml-cpu-" in n]) == len(inner["cpu_variants"])


def test_it_needs_nothing_from_the_laptop_but_glibc_and_libstdcxx(runtime_bundle, tmp_path):
    with tarfile.open(runtime_bundle.tarball) as archive:
        extract_all(archive, tmp_path)
    bin_dir = tmp_path / "clusterpanel-runtime" / "bin"
    from_the_laptop = ("libc.so", "libm.so", "ld-linux", "linux-vdso", "libstdc++.so", "libgcc_s.so")
    for path in [bin_dir / "ggml-rpc-server", *bin_dir.glob("libggml*.so")]:
        ldd = subprocess.run(["ldd", str(path)], capture_output=True, text=True, env={}).stdout
        assert "not found" not in ldd, ldd
        for line in ldd.splitlines():
            if "=>" in line and not any(part in line for part in from_the_laptop):
                assert str(bin_dir) in line, f"{path.name} takes {line.strip()} from the build machine"


def test_it_runs_on_laptops_with_glibc_2_34_and_gcc_12_libstdcxx(runtime_bundle):
    """Ubuntu 22.04, Debian 12, Fedora 35 and newer: the floor this build machine allows."""
    version = lambda text: tuple(int(x) for x in text.split("."))  # noqa: E731
    assert version(runtime_bundle.manifest["min_glibc"]) <= (2, 34)
    assert version(runtime_bundle.manifest["min_glibcxx"]) <= (3, 4, 30)


def test_it_lives_in_the_build_cache_outside_the_work_tree(runtime_bundle):
    assert settings.BASE_DIR not in runtime_bundle.tarball.parents
