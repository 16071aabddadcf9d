"""Open sockets when Redis is killed (a page's notices, a job's answer): each is closed with a code that asks its
page to open it again, a handshake during the outage is refused, and handshakes right after Redis is back
succeed. Before, handshakes answered 500 for seconds after Redis' return (channels_redis took stale pooled
connections), and daphne wrote a traceback per open socket and per refused handshake; now the log says the
outage once, and its end with a count."""

import contextlib
import time

import pytest
from django.test import Client
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from clusterpanel.kit.consumers import REDIS_AWAY
from jobs.models import Job, JobKind, JobStatus
from tests.jobs.standins import ready_deployment
from tests.services import redis_down

PATHS = ["/ws/status/", "/ws/status/", "/ws/status/", "/ws/jobs/{job}/"]


@pytest.fixture
def web_log(tmp_path):
    return tmp_path / "web.log"


def opened(base: str, cookie: str, path: str = "/ws/status/"):
    return connect(f"{base.replace('http://', 'ws://')}{path}", origin=base, open_timeout=10,
                   additional_headers={"Cookie": cookie})


def closed_code(socket) -> int:
    with pytest.raises(ConnectionClosed) as closed:
        while True:
            socket.recv(timeout=15)  # a job's socket first says where the job stands
    return closed.value.rcvd.code if closed.value.rcvd else 1006


def test_sockets_close_then_open_at_once_after_a_redis_restart_and_the_log_says_it_once(web_server, web_log, bob):
    job = Job.objects.create(kind=JobKind.CHAT, deployment=ready_deployment(), user=bob, status=JobStatus.RUNNING,
                             messages=[{"role": "user", "content": "Hello?"}], params={})
    browser = Client()
    browser.force_login(bob)
    cookie = f"sessionid={browser.cookies['sessionid'].value}"
    with contextlib.ExitStack() as stack:
        sockets = [stack.enter_context(opened(web_server, cookie, path.format(job=job.pk))) for path in PATHS]
        assert all(socket.ping().wait(10) for socket in sockets)
        with redis_down():
            codes = [closed_code(socket) for socket in sockets]
            with pytest.raises(InvalidStatus):
                opened(web_server, cookie)
            time.sleep(3)
    assert codes == [REDIS_AWAY] * len(PATHS), "each closed for its page to open it again"
    back = time.monotonic()
    for path in PATHS * 2:
        with opened(web_server, cookie, path.format(job=job.pk)) as socket:
            assert socket.ping().wait(10)
    assert time.monotonic() - back < 10, "the handshakes after Redis' return were answered at once"

    log = web_log.read_text()
    assert "Traceback" not in log, log
    assert log.count("WebSockets reaching Redis") == 2, log
    assert "works again, after" in log
