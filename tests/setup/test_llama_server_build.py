"""The benchmarks' llama-server is built only from the source the usual build already fetched: without it the
build says what to run and downloads nothing; a failed step is named with its log, never a traceback."""

import subprocess
import sys
from pathlib import Path

from tests.setup.test_build_failure import broken_sdist

ROOT = Path(__file__).resolve().parents[2]


def build_llama_server(cache: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "build_llama.py"), "--llama-server",
                           "--cache", str(cache)], capture_output=True, text=True, timeout=300)


def version() -> str:
    sys.path.insert(0, str(ROOT / "scripts"))
    import build_llama

    return build_llama.pinned_version()


def test_it_asks_for_the_usual_build_first_and_downloads_nothing(tmp_path):
    result = build_llama_server(tmp_path)
    assert result.returncode != 0
    assert "run `make setup` first" in result.stderr
    assert not (tmp_path / f"llama-cpp-python-{version()}" / "sdist").exists(), "nothing was fetched"
    assert result.stdout == ""


def test_it_names_the_failed_step_and_its_log(tmp_path):
    broken_sdist(tmp_path, version())  # a source distribution without llama.cpp in it
    result = build_llama_server(tmp_path)
    assert result.returncode == 1
    assert "Build failed at step: configure llama-server from the vendored llama.cpp" in result.stderr
    log = Path(result.stderr.split("Full log: ")[1].split()[0])
    assert log.name == "llama-server-configure.log" and log.exists()
    assert "Traceback" not in result.stderr
    assert result.stdout == ""
