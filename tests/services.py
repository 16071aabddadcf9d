"""Pytest plugin: every test run gets its own data folder and its own Redis.

It wraps pytest-django's start-up so that DATA_DIR and REDIS_URL are set before
Django reads its settings. A REDIS_URL given from outside is used as it is.
Test runs on one machine side by side each take a slot for their simulated LANs
(`take_turn`, called by whatever makes one, through `lan_harness`): a LAN's name and
subnet carry the slot, so one run never tears down another's laptops. Slot 0 keeps the
plain names (a run of an older checkout takes only slot 0); CLUSTERPANEL_TEST_SLOT
asks for one slot, waiting for it if another run holds it.
"""

import contextlib
import fcntl
import ipaddress
import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest

from clusterpanel.run.redis_server import RedisServer

_state: dict = {}


SLOTS = 8
OWN_REDIS = "CLUSTERPANEL_TEST_OWN_REDIS"  # the REDIS_URL this plugin set, not one given from outside


def lock_path(slot: int) -> Path:
    return Path(tempfile.gettempdir()) / ("clusterpanel-tests.lock" if slot == 0 else f"clusterpanel-tests-{slot}.lock")


def take_turn() -> int:
    """This run's LAN slot, held until the run ends: the first free one, or the one asked for."""
    if "slot" in _state:
        return _state["slot"]
    asked = os.environ.get("CLUSTERPANEL_TEST_SLOT")
    candidates = [int(asked)] if asked else list(range(SLOTS))
    slot = next((slot for slot in candidates if _hold(slot, wait=False)), None)
    if slot is None:
        slot = candidates[0]
        print(f"Another clusterpanel test run holds {lock_path(slot)}; waiting for it to finish.", flush=True)
        _hold(slot, wait=True)
    return slot


def _hold(slot: int, wait: bool) -> bool:
    handle = open(lock_path(slot), "w")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
    except BlockingIOError:
        handle.close()
        return False
    _state.update(slot=slot, lock=handle)
    return True


def slotted(name: str, subnet: str) -> tuple[str, str]:
    """`name` and `subnet` (a /24) as this run's slot has them: test, 10.232.0.0/24 → testb, 10.232.2.0/24. A letter,
    not a digit: an older checkout takes LAN test's links by name alone, and cpv-test12 would read as its laptop 12."""
    slot = take_turn()
    network = ipaddress.ip_network(subnet)
    moved = ipaddress.ip_network((int(network.network_address) + (slot << (32 - network.prefixlen)),
                                  network.prefixlen))
    return (name if slot == 0 else name + "abcdefg"[slot - 1]), str(moved)


def lan_harness(name: str, subnet: str):
    """A simulated LAN of this run's own, named and addressed by its slot."""
    from django.conf import settings

    from nodes.simlan.lan import SimLan

    name, subnet = slotted(name, subnet)
    return SimLan(name, Path(settings.DATA_DIR) / "simlan", subnet=subnet)


def unused_address(lan_subnet: str, host: int = 250) -> str:
    """An address inside a LAN this run made where nothing answers (laptops sit at .11 and up)."""
    return str(ipaddress.ip_network(lan_subnet)[host])


@pytest.hookimpl(wrapper=True)
def pytest_load_initial_conftests(early_config, parser, args):
    # For this process and every web server, worker and command it starts (clusterpanel/settings.py).
    os.environ["TESTS_HASH_PASSWORDS_FAST"] = "1"
    # llama.cpp's OpenMP threads (engines in the workers and their children) sleep at once when they wait rather
    # than spin for milliseconds: a suite's workers share the cores, and two engines spinning beside each other
    # ran five head-engine test files in 378-459 s against 66 s (docs/benchmarks.md, "Spinning threads in the
    # suite"); alone they take the same either way. The laptops' rpc-servers keep RPC_SPIN_COUNT (set over SSH).
    os.environ.setdefault("OMP_WAIT_POLICY", "passive")
    data_dir = Path(tempfile.mkdtemp(prefix="clusterpanel-test-"))
    os.chmod(data_dir, 0o755)  # simulated laptops' homes live below it
    (data_dir / "static").mkdir()
    _state["data_dir"] = data_dir
    os.environ["DATA_DIR"] = str(data_dir)
    if not os.environ.get("REDIS_URL") or os.environ.get(OWN_REDIS) == os.environ["REDIS_URL"]:
        # A Redis of its own also for each worker of a parallel run (pytest-xdist), whose parent's it inherits.
        server = RedisServer.start(data_dir / "redis")
        _state["redis"] = server
        os.environ["REDIS_URL"] = os.environ[OWN_REDIS] = server.url
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
    _state["restarts"] = redis_restarts() + 1
    try:
        yield
    finally:
        _state["redis"] = RedisServer.start(_state["data_dir"] / "redis", port=server.port)


def redis_restarts() -> int:
    """How many times this run's Redis was stopped so far (processes that lived through it may hold stale
    connections: a test that shares them hands them on only if none happened)."""
    return _state.get("restarts", 0)


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
