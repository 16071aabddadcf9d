"""A head whose CPU traps in llama.cpp's AMX kernels (SIGILL on a Xeon VM reporting AMX) still answers: the panel
finds out in a throwaway process, loads every model there without weight repacking, says so on the System page,
and names a llama.cpp death by a signal in words. The trap is played by tests/standins/amx_trap, so that it is
tried on every CPU (some of the machines this suite runs on trap for real); the processes, llama.cpp and the
model are real."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from models_app.llamacpp import cpucheck, oneshot
from models_app.llamacpp.libllama import LlamaCppError
from tests.conftest import ROOT

pytestmark = pytest.mark.timeout(300)
TRAP = ROOT / "tests" / "standins" / "amx_trap"
RIVERS = [{"role": "user", "content": "Name three rivers."}]


def head(data_dir: Path, trapping: bool = True) -> dict[str, str]:
    """The environment of a head process with its own data folder, on a CPU that traps or not."""
    env = {**os.environ, "DATA_DIR": str(data_dir)}
    if trapping:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TRAP), os.environ.get("PYTHONPATH")]))
    return env


def the_issue_command(env: dict[str, str]) -> subprocess.CompletedProcess:
    """The completion that died three times in three on the AMX head (issue 21)."""
    argv = [sys.executable, "-m", "models_app.llamacpp.oneshot", "--prompt=", "--max-tokens", "48", "--ctx", "2048",
            f"--chat={json.dumps(RIVERS)}"]
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)


def test_the_stand_in_traps_like_the_amx_head(tmp_path):
    repacked = subprocess.run([sys.executable, "-m", "models_app.llamacpp.cpucheck", "--trial", "on"], cwd=ROOT,
                              env=head(tmp_path), capture_output=True, timeout=120)
    plain = subprocess.run([sys.executable, "-m", "models_app.llamacpp.cpucheck", "--trial", "off"], cwd=ROOT,
                           env=head(tmp_path), capture_output=True, timeout=120)
    assert repacked.returncode == -signal.SIGILL, "a repacked model dies on its first multi-token prompt"
    assert plain.returncode == 0, "a model in plain buffers runs"


def test_a_head_whose_repacked_kernels_trap_answers_as_a_head_that_does_not(tmp_path):
    trapping = the_issue_command(head(tmp_path / "trapping"))
    assert trapping.returncode == 0, trapping.stderr[-2000:]
    answer = json.loads(trapping.stdout)
    assert answer["completion_tokens"] > 0 and answer["text"].strip()

    kept = json.loads((tmp_path / "trapping" / cpucheck.FILE).read_text())
    assert kept["extra_buffers"] is False and kept["runs"] is True
    assert "illegal instruction (SIGILL)" in kept["detail"] and "without" in kept["detail"]

    usual = the_issue_command(head(tmp_path / "usual", trapping=False))
    assert usual.returncode == 0, usual.stderr[-2000:]
    assert json.loads(usual.stdout)["text"] == answer["text"], "the same answer without repacking"
    # Without the stand-in, the verdict is this machine's own: CI has run on Xeons whose AMX really traps.
    trial = [sys.executable, "-m", "models_app.llamacpp.cpucheck", "--trial", "on"]
    repacking_runs_here = subprocess.run(trial, cwd=ROOT, capture_output=True, timeout=120).returncode == 0
    kept_usual = json.loads((tmp_path / "usual" / cpucheck.FILE).read_text())
    assert kept_usual["extra_buffers"] is repacking_runs_here and kept_usual["runs"] is True, kept_usual


def test_the_engine_loads_without_repacking_where_it_traps(tmp_path):
    script = (
        "from jobs.engine.loaded_model import Engine\n"
        "from models_app.library.bundled import bundled_model_path\n"
        "engine = Engine(str(bundled_model_path()), [], 0, [], 512, [])\n"
        "engine.load(lambda progress: None)\n"
        "tokens, stops = engine.chat_prompt([{'role': 'user', 'content': 'Name three rivers.'}])\n"
        "params = {'temperature': 0.0, 'top_p': 1.0, 'top_k': 40, 'repeat_penalty': 1.0, 'max_tokens': 16}\n"
        "outcome = engine.run(tokens, params, lambda text: None, lambda: False, stops)\n"
        "print(outcome.completion_tokens)\n"
    )
    ran = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=head(tmp_path), capture_output=True,
                         text=True, timeout=240)
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert int(ran.stdout.split()[-1]) > 0


def test_a_llama_cpp_death_by_a_signal_is_told_in_words(tmp_path, monkeypatch):
    """Were the trial wrong (it said repacking runs), the completion dies; the panel names the signal in words
    and shows none of llama.cpp's log."""
    kept = cpucheck.Verdict(True, True, "told so by the test", cpucheck.build_key(), 0.0)
    (tmp_path / cpucheck.FILE).write_text(json.dumps(kept.__dict__))
    for name in ("DATA_DIR", "PYTHONPATH"):  # the completion's process inherits them
        monkeypatch.setenv(name, head(tmp_path)[name])
    with pytest.raises(LlamaCppError) as failed:
        oneshot.complete([], "Name three rivers, and say where each one runs.", 8)
    message = str(failed.value)
    assert message.startswith("llama.cpp stopped on an illegal instruction (SIGILL)"), message
    assert "llama_" not in message and "exit" not in message, "no log fragment, no raw exit code"


def test_the_system_page_says_how_models_load_here(tmp_path, settings, client, alice):
    settings.DATA_DIR = tmp_path
    client.force_login(alice)
    assert "Not tried yet" in client.get("/status/").content.decode()
    fallback = cpucheck.Verdict(False, True, "With weight repacking llama.cpp stopped on an illegal instruction "
                                             "(SIGILL).", cpucheck.build_key(), 0.0)
    (tmp_path / cpucheck.FILE).write_text(json.dumps(fallback.__dict__))
    page = client.get("/status/").content.decode()
    assert "llama.cpp on this CPU" in page and "illegal instruction (SIGILL)" in page


def test_a_trial_killed_from_outside_decides_nothing_and_is_tried_again(tmp_path):
    """The OOM killer or a stop ending the trial says nothing about the CPU: llama.cpp's defaults stay, and no
    verdict is kept, so the next process that loads a model tries again."""
    env = {**head(tmp_path), "STANDIN_SIGNAL": "KILL"}
    script = "from models_app.llamacpp import cpucheck; print(cpucheck.verdict().extra_buffers)"
    ran = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=240)
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert ran.stdout.split()[-1] == "True", "the defaults kept"
    assert not (tmp_path / cpucheck.FILE).exists(), "nothing kept: the next load tries again"
