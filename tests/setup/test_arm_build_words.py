"""The aarch64 build (scripts/build_arm.py) says in words what it lacks or which step failed, never a traceback, and
leaves no bundle behind."""

import os
import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "build_arm.py"


def version() -> str:
    sys.path.insert(0, str(ROOT / "scripts"))
    import build_llama

    return build_llama.pinned_version()


def test_it_names_the_packages_when_the_cross_compiler_is_missing(tmp_path):
    bare = tmp_path / "bin"
    bare.mkdir()
    result = subprocess.run([sys.executable, str(SCRIPT), "--cache", str(tmp_path / "cache")], capture_output=True,
                            text=True, timeout=60, env={**os.environ, "PATH": str(bare)})
    assert result.returncode == 1
    assert result.stderr.strip() == (
        "The aarch64 runtime needs Debian's cross compiler: run `make arm` (it installs it) or apt-get install "
        "binutils-aarch64-linux-gnu g++-aarch64-linux-gnu gcc-aarch64-linux-gnu")
    assert not (tmp_path / "cache").exists()


def test_it_names_the_failed_step_and_its_log(tmp_path):
    found = version()
    project = tmp_path / "project" / f"llama_cpp_python-{found}"  # a source distribution without llama.cpp
    project.mkdir(parents=True)
    (project / "README.md").write_text("no vendor/llama.cpp here\n")
    sdists = tmp_path / "cache" / f"llama-cpp-python-{found}" / "sdist"
    sdists.mkdir(parents=True)
    with tarfile.open(sdists / f"llama_cpp_python-{found}.tar.gz", "w:gz") as archive:
        archive.add(project, arcname=project.name)
    result = subprocess.run([sys.executable, str(SCRIPT), "--cache", str(tmp_path / "cache")], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 1
    assert "Build failed at step: configure llama.cpp for aarch64 with the cross compiler" in result.stderr
    log = Path(result.stderr.split("Full log: ")[1].split()[0])
    assert log.exists() and "does not exist" in log.read_text()
    assert "Traceback" not in result.stderr
    assert not list((tmp_path / "cache" / f"llama-cpp-python-{found}").glob("runtime-*"))
