"""make run's process keeper (clusterpanel/run/keeper.py) with real processes and its back-offs shortened: a process
that stops is started again, saying why and when; a stop ends every process and what each started, also one
that ignores SIGTERM, and also when it comes before every process has started."""

import io
import re
import sys
import threading

from clusterpanel.kit.procs import is_running
from clusterpanel.run.keeper import Keeper
from tests.clusterpanel.test_runpanel import still_running
from tests.conftest import wait_until

PY = sys.executable


def python(code: str) -> str:
    return f"{PY} -c {code!r}"


def keeper_of(commands: dict[str, str], **timings) -> tuple[Keeper, io.StringIO, threading.Thread]:
    out = io.StringIO()
    keeper = Keeper(commands, {"PYTHONUNBUFFERED": "1"}, "/", out, **{"first_backoff": 0.2, "max_backoff": 0.8,
                                                                        "stable": 60, "grace": 2, **timings})
    thread = threading.Thread(target=keeper.run)
    thread.start()
    return keeper, out, thread


def stopped(keeper: Keeper, thread: threading.Thread) -> None:
    keeper.stop()
    thread.join(30)
    assert not thread.is_alive(), "the keeper ended"


def test_a_process_that_stops_is_started_again_after_a_growing_back_off_saying_why(tmp_path):
    runs = tmp_path / "runs"
    crashing = python(f"import sys; open({str(runs)!r}, 'a').write('run\\n'); print('up', flush=True); sys.exit(3)")
    steady = python("import time; print('steady here', flush=True); time.sleep(600)")
    keeper, out, thread = keeper_of({"crashing": crashing, "steady": steady})
    try:
        wait_until(lambda: runs.exists() and runs.read_text().count("run") >= 4, 60, "four runs of the crashing one")
        text = out.getvalue()
        assert re.search(r"\d\d:\d\d:\d\d steady\.1\s+\| steady here", text), text
        said = re.findall(r"panel\s+\| crashing\.1 stopped \(exit code 3\) after \d+ s; "
                          r"starting it again in ([\d.]+) s", text)
        assert [float(s) for s in said[:3]] == [0.2, 0.4, 0.8], text
        assert "(restart 2)" in text, "each line counts the restarts"
        assert text.count("steady here") == 1, "the others go on untouched"
    finally:
        stopped(keeper, thread)


def test_a_killed_process_is_named_by_its_signal(tmp_path):
    keeper, out, thread = keeper_of({"sleeper": python("import time; print('ready', flush=True); time.sleep(600)")})
    try:
        wait_until(lambda: "ready" in out.getvalue(), 30, "the sleeper to start")
        first = keeper.programs[0].process.pid
        keeper.programs[0].process.kill()
        wait_until(lambda: out.getvalue().count("ready") == 2, 30, "the sleeper to start again")
        assert "sleeper.1 stopped (killed by SIGKILL)" in out.getvalue()
        assert keeper.programs[0].process.pid != first
    finally:
        stopped(keeper, thread)


def test_a_stop_ends_every_process_its_children_and_one_that_ignores_sigterm(tmp_path):
    parent = python("import subprocess, sys, time; child = subprocess.Popen([sys.executable, '-c', "
                    "'import time; time.sleep(600)']); print('child', child.pid, flush=True); time.sleep(600)")
    stubborn = python("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('stubborn', "
                      "flush=True); time.sleep(600)")
    keeper, out, thread = keeper_of({"parent": parent, "stubborn": stubborn})
    wait_until(lambda: "child " in out.getvalue() and "stubborn" in out.getvalue(), 30, "both to start")
    pids = {int(re.search(r"child (\d+)", out.getvalue()).group(1))} | {p.process.pid for p in keeper.programs}
    stopped(keeper, thread)
    assert not still_running(pids, within=5)
    assert "stubborn.1 did not stop within 2 s; killed" in out.getvalue()


def test_a_stop_before_every_process_started_starts_no_more_and_ends_those_that_did(tmp_path):
    started = tmp_path / "started"
    command = python(f"import time; open({str(started)!r}, 'a').write('x'); time.sleep(600)")
    keeper = Keeper({f"p{n}": command for n in range(5)}, {}, "/", io.StringIO(), grace=2)
    real_start = keeper.start

    def start_then_stop(program):  # Ctrl-C right after the second process starts
        real_start(program)
        if program is keeper.programs[1]:
            keeper.stop()

    keeper.start = start_then_stop
    keeper.run()
    pids = [p.process.pid for p in keeper.programs if p.process is not None]
    assert len(pids) == 2 and not any(is_running(pid) for pid in pids)
