"""What a Celery worker does when its Redis or one of its processes goes away: it lives on, and says so in one
line each, not in tracebacks.

kombu's Redis channel hands its unacknowledged messages back when it closes. A worker that lost Redis while it
held tasks closes its broken connection first and that connection's channels after, and by then the channel has
no connection to build a client from: `restore_unacked` dies in `_connparams` with "'NoneType' object has no
attribute 'hostname'" and takes the worker with it (the chaos soak of issue 35; upstream celery/kombu#582 and
#970 hit the same path). Nothing can be handed back through a connection that is gone, and nothing needs to be:
Redis keeps each delivered message in its unacked set until the message is acknowledged, and gives it out again
after the visibility timeout; the panel's own state is in the database, and its engines re-send the message of
every waiting job when they start (jobs/queue/queueing.py)."""

import logging
import re

from billiard.exceptions import WorkerLostError
from celery.signals import after_setup_logger
from kombu.transport import redis as kombu_redis

log = logging.getLogger(__name__)
_restore_unacked = kombu_redis.QoS.restore_unacked


def restore_unacked(qos, client=None) -> None:
    if client is None and getattr(qos.channel.connection, "client", None) is None:
        held = len(qos._delivered)
        qos._delivered.clear()
        if held:
            log.warning("Redis went away while this worker held %d task message%s; Redis gives %s out again after "
                        "its visibility timeout, and the jobs they were for wait in the database meanwhile",
                        held, "" if held == 1 else "s", "it" if held == 1 else "them")
        return
    _restore_unacked(qos, client)


class FaultsInOneLine(logging.Filter):
    """A pool process that died under its task (killed, out of memory) is logged by Celery as an ERROR with the
    traceback of where the main process noticed: some 20 lines of Celery's own frames that say nothing the
    exception's message does not. The line stays, in words; the traceback goes."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        exc = getattr(exc, "exc", exc)  # billiard wraps it with its traceback's text (ExceptionWithTraceback)
        if isinstance(exc, WorkerLostError):
            how = re.sub(r"\s*Job: \d+\.?$", "", str(exc).removeprefix("Worker exited prematurely: "))
            record.msg, record.args = "A worker process died under its task: %s", (how,)
            record.exc_info = record.exc_text = None
        return True


def one_line_faults(logger: logging.Logger, **_) -> None:
    for handler in logger.handlers:
        handler.addFilter(FaultsInOneLine())


def install() -> None:
    kombu_redis.QoS.restore_unacked = restore_unacked
    after_setup_logger.connect(one_line_faults, weak=False)
