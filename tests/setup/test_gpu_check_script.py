"""bench/gpu_check.sh on a machine without an NVIDIA GPU: it says "not run" within seconds, after the checks that
need no GPU, and leaves no process and no temporary folder behind, whether it ends by itself or is stopped."""

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import wait_until

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "gpu_check.sh"

pytestmark = pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this machine has an NVIDIA GPU")


def environment(tmp_path: Path) -> dict:
    (tmp_path / "tmp").mkdir()
    return {**os.environ, "OUT": str(tmp_path / "out"), "TMPDIR": str(tmp_path / "tmp")}


def check(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict, float]:
    started = time.monotonic()
    result = subprocess.run(["bash", str(SCRIPT), *args], cwd=ROOT, env=environment(tmp_path),
                            capture_output=True, text=True, timeout=120)
    return result, json.loads((tmp_path / "out" / "gpu_check.json").read_text()), time.monotonic() - started


def processes_under(folder: Path) -> list[str]:
    """Command lines of running processes that name anything inside `folder`."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(folder) in text:
            found.append(text)
    return found


def assert_nothing_left(tmp_path: Path) -> None:
    assert list((tmp_path / "tmp").iterdir()) == [], "the temporary folder is removed"
    assert processes_under(tmp_path / "tmp") == [], "no process it started runs on"


def has_head_and_bundle() -> bool:
    cache = Path(os.environ.get("CLUSTERPANEL_CACHE", Path.home() / ".cache" / "clusterpanel"))
    bundles = list(cache.glob("llama-cpp-python-*/runtime-*/clusterpanel-runtime-*.tar.gz"))
    head = ROOT / ".venv" / "bin" / "python"
    return bool(bundles) and head.exists() and subprocess.run([head, "-c", "import llama_cpp"]).returncode == 0


def test_it_says_not_run_and_leaves_nothing(tmp_path):
    result, report, seconds = check(tmp_path)
    assert result.returncode == 0, result.stderr
    assert "no NVIDIA GPU here: not run" in result.stdout.splitlines()[-3:]
    assert report["outcome"] == "no NVIDIA GPU here: not run" and report["runs"] == {}
    assert report["nvidia_smi"] == ["not installed"]
    assert seconds < 30
    if "bundle" in report:  # what it could check without a GPU: the bundle unpacks and lists its devices
        assert any(device["type"] == "cpu" for device in report["devices"])
    assert_nothing_left(tmp_path)


@pytest.mark.skipif(not has_head_and_bundle(), reason="needs the runtime bundle and the head's build (make setup)")
def test_it_runs_the_cpu_leg_when_asked_and_leaves_nothing(tmp_path):
    result, report, seconds = check(tmp_path, "--cpu-only")
    assert result.returncode == 0, result.stderr
    assert "CPU" in report["runs"], report  # a leg that did not run is in the report with why
    run = report["runs"]["CPU"]
    assert len(run["tokens"]) == 64 and run["decode_tok_s"] > 0
    assert run["offloaded"] == "31/31", "every layer on the rpc-server's device"
    assert any(device.startswith("RPC0[") for device in run["model_buffers_mib"])
    assert "| CPU | CPU | 31/31 |" in result.stdout
    assert seconds < 60
    assert_nothing_left(tmp_path)


@pytest.mark.skipif(not has_head_and_bundle(), reason="needs the runtime bundle and the head's build (make setup)")
def test_it_stops_what_it_started_when_stopped(tmp_path):
    script = subprocess.Popen(["bash", str(SCRIPT), "--cpu-only"], cwd=ROOT, env=environment(tmp_path),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: any("ggml-rpc-server -H" in p for p in processes_under(tmp_path / "tmp")), 60,
                   "its rpc-server to start")
        script.send_signal(signal.SIGTERM)
        assert script.wait(timeout=20) == 143
    finally:
        script.kill()
        script.wait()
    assert_nothing_left(tmp_path)
