"""A pidfile not written yet reads as "not yet", and one holding garbage as no server: neither crashes anyone.

The laptop-side scripts run here in a plain shell: a laptop too busy to write
the pid within a second cannot be made on demand, so a slow `mv` (the pidfile is
written aside, then renamed) stands in for it.
"""

import os
import subprocess
import time
from pathlib import Path

import pytest

from nodes.servers import rpcserver

FAKE_SERVER = "#!/bin/sh\nwhile :; do sleep 0.2; done\n"  # its command line names ggml-rpc-server, as they check
SLOW_MV = "#!/bin/sh\nsleep 2\nexec /bin/mv \"$@\"\n"


@pytest.fixture
def laptop(tmp_path) -> dict:
    for name, text in (("bin/ggml-rpc-server", FAKE_SERVER), ("slow/mv", SLOW_MV)):
        path = tmp_path / name
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
        path.chmod(0o755)
    place = {"dir": tmp_path / "rpc" / "50170", "bin": tmp_path / "bin" / "ggml-rpc-server", "tmp": tmp_path}
    yield place
    script(rpcserver.STOP, place["dir"])


def script(text: str, *args, path: str | None = None) -> list[str]:
    env = {**os.environ, "PATH": path or os.environ["PATH"]}
    done = subprocess.run(["sh", "-c", text, "sh", *map(str, args)], env=env, capture_output=True, text=True,
                          timeout=30)
    return done.stdout.split()


def start(laptop: dict, path: str | None = None) -> list[str]:
    return script(rpcserver.START, laptop["dir"], laptop["bin"], "127.0.0.1", 50170, 1, laptop["tmp"] / "cache",
                  0, path=path)


def status(laptop: dict) -> list[str]:
    return script(rpcserver.STATUS, laptop["dir"], 0)


def test_it_reads_a_pid_not_written_yet_as_not_yet_and_learns_it_later(laptop):
    slow = f"{laptop['tmp'] / 'slow'}:{os.environ['PATH']}"
    words = start(laptop, path=slow)
    assert words == ["starting"] and rpcserver.pid_in(words) is None
    deadline = time.monotonic() + 10
    while status(laptop)[0] != "running" and time.monotonic() < deadline:
        time.sleep(0.2)
    pid = rpcserver.pid_in(status(laptop)[:2])
    assert pid and Path(f"/proc/{pid}").exists()
    assert start(laptop) == ["running", str(pid)], "a second start finds it, not a second server"


@pytest.mark.parametrize("garbage", ["self", "", "12ab", "started"])
def test_it_reads_a_pidfile_holding_garbage_as_no_server(laptop, garbage):
    laptop["dir"].mkdir(parents=True)
    (laptop["dir"] / "pid").write_text(garbage + "\n")
    assert status(laptop) == ["stopped"]
    script(rpcserver.STOP, laptop["dir"])
    assert not (laptop["dir"] / "pid").exists()
    words = start(laptop)
    assert words[0] == "started" and rpcserver.pid_in(words)
