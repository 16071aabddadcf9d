"""Pytest plugin: every test run gets its own data folder and its own Redis.

It wraps pytest-django's start-up so that DATA_DIR and REDIS_URL are set before
Django reads its settings. A REDIS_URL given from outside is used as it is.
Test runs on one machine take turns with their simulated LANs (`take_turn`, called
by the fixtures that make one): those use fixed names and addresses, and a second
run would tear down the first one's laptops. Runs without a LAN do not wait.
"""

import contextlib
import fcntl
import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest

from clusterpanel.redis_server import RedisServer

_state: dict = {}


LOCK = Path(tempfile.gettempdir()) / "clusterpanel-tests.lock"


def take_turn() -> None:
    if "lock" in _state:
        return
    handle = open(LOCK, "w")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print(f"Another clusterpanel test run holds {LOCK}; waiting for it to finish.", flush=True)
        fcntl.flock(handle, fcntl.LOCK_EX)
    _state["lock"] = handle


@pytest.hookimpl(wrapper=True)
def pytest_load_initial_conftests(early_config, parser, args):
    data_dir = Path(tempfile.mkdtemp(prefix="clusterpanel-test-"))
    os.chmod(data_dir, 0o755)  # simulated laptops' homes live below it
    (data_dir / "static").mkdir()
    _state["data_dir"] = data_dir
    os.environ["DATA_DIR"] = str(data_dir)
    if not os.environ.get("REDIS_URL"):
        server = RedisServer.start(data_dir / "redis")
        _state["redis"] = server
        os.environ["REDIS_URL"] = server.url
    return (yield)


@contextlib.contextmanager
def redis_down():
    """This run's Redis stopped as a crash would stop it (no final save) for the block, then started again on the
    same port."""
    server = _state.get("redis")
    if server is None:
        pytest.fail("This test stops Redis: run it with the suite's own Redis (REDIS_URL unset).")
    server.process.kill()
    server.process.wait()
    try:
        yield
    finally:
        _state["redis"] = RedisServer.start(_state["data_dir"] / "redis", port=server.port)


def restart_redis(down_for: float) -> None:
    with redis_down():
        time.sleep(down_for)


def pytest_unconfigure(config):
    server = _state.pop("redis", None)
    if server is not None:
        server.stop()
    data_dir = _state.pop("data_dir", None)
    if data_dir is not None:
        shutil.rmtree(data_dir, ignore_errors=True)
    lock = _state.pop("lock", None)
    if lock is not None:
        lock.close()
