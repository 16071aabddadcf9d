"""A failed llama.cpp build names the step and its log, never a Python traceback."""

import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BROKEN_BACKEND = '''
def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    raise SystemExit("the compiler ran out of memory (simulated)")
'''


def broken_sdist(cache: Path, version: str) -> None:
    """A source distribution whose build always fails, where the build script looks first."""
    project = cache / "project" / f"llama_cpp_python-{version}"
    project.mkdir(parents=True)
    (project / "pyproject.toml").write_text(
        '[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n'
        f'[project]\nname = "llama-cpp-python"\nversion = "{version}"\n')
    (project / "backend.py").write_text(BROKEN_BACKEND)
    sdists = cache / f"llama-cpp-python-{version}" / "sdist"
    sdists.mkdir(parents=True)
    with tarfile.open(sdists / f"llama_cpp_python-{version}.tar.gz", "w:gz") as archive:
        archive.add(project, arcname=project.name)


def test_it_names_the_failed_step_and_its_log(tmp_path):
    sys.path.insert(0, str(ROOT / "scripts"))
    import build_llama

    broken_sdist(tmp_path, build_llama.pinned_version())
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "build_llama.py"), "--cache", str(tmp_path)],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 1
    assert "Build failed at step: build the llama-cpp-python wheel" in result.stderr
    log = result.stderr.split("Full log: ")[1].split()[0]
    assert Path(log).exists() and "ran out of memory (simulated)" in Path(log).read_text()
    assert "Traceback" not in result.stderr.split("Build failed")[1]
    assert result.stdout == "", "nothing that looks like a wheel path is printed"
