"""Processes as /proc tells them (clusterpanel/kit/procs.py): a zombie is not running, a command name with spaces and
parentheses does not shift the fields, and a claim names its process by pid and start time, so a reused pid is
told apart and a claim from another machine is left to its owner."""

import os
import subprocess
import sys
import time

from clusterpanel.kit import procs


def test_it_reads_its_own_process_and_its_parent():
    assert procs.is_running(os.getpid())
    assert procs.parent_of(os.getpid()) == os.getppid()
    assert procs.started_at(os.getpid()).isdigit()


def test_a_name_with_spaces_and_parentheses_does_not_shift_the_fields(tmp_path):
    odd = tmp_path / "a (b) c"
    odd.symlink_to(sys.executable)
    child = subprocess.Popen([str(odd), "-c", "import time; time.sleep(30)"])
    try:
        deadline = time.monotonic() + 30
        while procs.parent_of(child.pid) != os.getpid() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert procs.parent_of(child.pid) == os.getpid()
        assert procs.stat_fields(child.pid)[0] in "RSD"
    finally:
        child.kill()
        child.wait()


def test_a_zombie_and_a_gone_process_are_not_running():
    child = subprocess.Popen(["true"])
    deadline = time.monotonic() + 30
    while procs.stat_fields(child.pid) and procs.stat_fields(child.pid)[0] != "Z" and time.monotonic() < deadline:
        time.sleep(0.02)
    assert procs.stat_fields(child.pid)[0] == "Z"  # not reaped yet
    assert not procs.is_running(child.pid) and procs.started_at(child.pid) is None
    child.wait()
    assert procs.stat_fields(child.pid) is None and not procs.is_running(child.pid)


def test_a_claim_tells_a_running_claimer_an_ended_one_and_a_reused_pid():
    mine = procs.this_process()
    assert procs.is_claim(mine) and not procs.is_claim("general@lab-head") and not procs.is_claim("")
    assert procs.ended(mine) == "" and procs.still_running(mine)
    child = subprocess.Popen(["true"])
    child.wait()
    gone = f"{procs.this_machine()}:{child.pid}:0"
    assert procs.ended(gone).endswith("has ended") and not procs.still_running(gone)
    reused = f"{procs.this_machine()}:{os.getpid()}:1"
    assert procs.ended(reused).endswith("a new one took its pid"), procs.ended(reused)
    elsewhere = f"another-host/4026531836:{child.pid}:0"
    assert procs.still_running(elsewhere), "another machine's process cannot be checked here: it ends its own work"
