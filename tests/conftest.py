"""Shared fixtures: named users, the simulated LAN, real workers and a real web server."""

import ctypes
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.conf import settings

from clusterpanel.accounts.models import Role, User
from clusterpanel.web.staticfiles import collect_once
from nodes.simlan.lan import Lan, SimLanError
from tests import services
from tests.emulated import arm_lan, lavapipe_lan  # noqa: F401 (fixtures: one ARM and one lavapipe laptop a run)

ROOT = Path(__file__).resolve().parent.parent
PASSWORD = "correct horse battery staple"
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


@pytest.fixture
def alice(db) -> User:
    """A lab admin."""
    return User.objects.create_user("alice", "alice@example.org", PASSWORD, role=Role.ADMIN)


@pytest.fixture
def bob(db) -> User:
    """A plain user."""
    return User.objects.create_user("bob", "bob@example.org", PASSWORD, role=Role.USER)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port: int, host: str = "127.0.0.1", timeout: float = 30.0,
                  process: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise AssertionError(f"process exited with {process.returncode} before listening on {port}")
        try:
            socket.create_connection((host, port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"nothing listened on {host}:{port} within {timeout} s")


def wait_until(check, timeout: float, what: str):
    """`check()`'s first truthy result within `timeout` seconds; fails naming `what` otherwise."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = check()
        if result:
            return result
        time.sleep(0.2)
    raise AssertionError(f"{what} did not happen within {timeout} s")


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def child_env() -> dict[str, str]:
    """Environment for child processes that must see the test database."""
    name = settings.DATABASES["default"]["NAME"]
    return {**os.environ, "DATABASE_URL": f"sqlite:///{name}"}


@pytest.fixture(scope="session", autouse=True)
def collected_static() -> None:
    """Static files where the served panel finds them, as `make run` leaves them. Every test: a page rendered
    by the test client names its scripts by their hashed names, which only collected files have.

    Collected once per version of the sources and copied from the build cache after: compressing them took
    13 to 19 s of CPU in each worker of every run."""
    collect_once()


@pytest.fixture
def web_env() -> dict[str, str]:
    """More environment for the web server; a test module overrides this fixture to set some."""
    return {}


@pytest.fixture
def web_log() -> Path | None:
    """Where the web server's log goes (nowhere); a test module overrides this fixture to read it."""
    return None


def ends_with_this_process() -> None:
    """In a child, before it runs: the kernel sends it SIGTERM when the test process ends, however that ends (a
    shared server outlives its test; an interrupted run never reaches the session's tear-down)."""
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def start_web_server(env: dict[str, str], log) -> tuple[subprocess.Popen, str]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "clusterpanel.web.webserver", "-b", "127.0.0.1", "-p", str(port),
         "clusterpanel.asgi:application"],
        cwd=ROOT, env=env, stdout=log, stderr=log, preexec_fn=ends_with_this_process,
    )
    try:
        wait_for_port(port, process=process)
    except BaseException:
        stop(process)
        raise
    return process, f"http://127.0.0.1:{port}"


@pytest.fixture(scope="session")
def shared_web_servers() -> Iterator[dict]:
    """This worker's web servers that tests share, one per environment, stopped at the end of the run."""
    servers: dict[frozenset, tuple[subprocess.Popen, str]] = {}
    yield servers
    for process, _ in servers.values():
        stop(process)


def unchanging(env: dict[str, str]) -> frozenset:
    """What a server's environment is, less what pytest changes from test to test."""
    return frozenset((name, value) for name, value in env.items() if name != "PYTEST_CURRENT_TEST")


@pytest.fixture
def web_server(transactional_db, collected_static, web_env, web_log, shared_web_servers) -> Iterator[str]:
    """The panel's real web server (daphne, with its body limits) on a free port, on the test database.

    Tests whose server has the same environment share one (its start costs 2 to 3 s of CPU: a hundred tests
    use it); the database is the test's own all the same, and the server keeps nothing of its own between
    requests. A test that reads the server's log (web_log) gets one of its own; a server that died, or lived
    through a Redis restart, is not handed on."""
    env = {**child_env(), **web_env}
    if web_log:
        with open(web_log, "w") as log:
            process, url = start_web_server(env, log)
            try:
                yield url
            finally:
                stop(process)
        return
    key = unchanging(env)
    process, url = shared_web_servers.get(key) or (None, "")
    if process is None or process.poll() is not None:
        process, url = shared_web_servers[key] = start_web_server(env, subprocess.DEVNULL)
    restarts = services.redis_restarts()
    try:
        yield url
    finally:
        if process.poll() is not None or services.redis_restarts() != restarts:
            stop(shared_web_servers.pop(key)[0])


@pytest.fixture
def celery_pool() -> list[str]:
    """How the test Celery worker runs its tasks (one at a time); a test module overrides this fixture."""
    return ["--pool", "solo"]


@pytest.fixture
def celery_worker(transactional_db, celery_pool) -> Iterator[subprocess.Popen]:
    """A real Celery worker on the test Redis and the test database, with no work left by earlier tests."""
    from clusterpanel.kit.celery import app

    app.control.purge()
    process = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "clusterpanel", "worker", *celery_pool,
         "--loglevel", "WARNING", "--without-mingle", "--without-gossip"],
        cwd=ROOT, env=child_env(),
    )
    try:
        yield process
    finally:
        stop(process)


@pytest.fixture
def supervisor_interval() -> float:
    """Seconds between the supervisor's checks (twice a second); a test module overrides this fixture."""
    return 0.5


@pytest.fixture
def supervisor(transactional_db, supervisor_interval) -> Iterator[subprocess.Popen]:
    """The panel's rpc-server supervisor."""
    process = subprocess.Popen([sys.executable, "manage.py", "supervise", "--interval", str(supervisor_interval)],
                               cwd=ROOT, env=child_env())
    yield process
    stop(process)


@pytest.fixture
def collector(transactional_db) -> Iterator[subprocess.Popen]:
    """The metrics collector, as `make run` starts it."""
    process = subprocess.Popen([sys.executable, "manage.py", "metrics"], cwd=ROOT, env=child_env())
    yield process
    stop(process)


@pytest.fixture(scope="session")
def lan_turn() -> None:
    """Wait for any other test run's simulated LAN to be gone (see tests/services.py)."""
    services.take_turn()


_session_lan: list[Lan] = []  # the `lan` fixture's laptops, once made


@pytest.fixture(scope="module", autouse=True)
def no_rpc_server_left_on_the_laptops() -> None:
    """Each test file starts with no rpc-server an earlier file left on the session's simulated laptops: one left
    on a port makes the next server there exit at once, and the supervisor restart it twice a second for the
    whole test. Before the file's own fixtures (autouse comes first), so its module-wide servers stay. Each
    laptop's servers run as that laptop's own user, which this run made."""
    if _session_lan:
        for laptop in _session_lan[0].laptops:
            subprocess.run(["pkill", "-KILL", "-u", laptop.user, "-x", "ggml-rpc-server"], check=False)


@pytest.fixture(scope="session")
def lan(lan_turn) -> Iterator[Callable[[int], Lan]]:
    """`lan(3)`: at least three simulated laptops, made once per run and removed at its end."""
    harness = services.lan_harness("test", "10.232.0.0/24")
    current = _session_lan

    def bring_up(count: int) -> Lan:
        if not current or len(current[0].laptops) < count:
            try:
                current[:] = [harness.up(count)]
            except SimLanError as exc:
                pytest.fail(str(exc), pytrace=False)
        return current[0]

    try:
        yield bring_up
    finally:
        if current:
            harness.down()
            current.clear()


@pytest.fixture(scope="session")
def runtime_bundle():
    from nodes.runtime.bundle import find_bundle

    return find_bundle()
