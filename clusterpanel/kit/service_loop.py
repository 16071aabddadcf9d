"""The loop of the panel's long-running processes (supervisor, metrics collector).

Under `make run` one process exiting ends all the others, so a round that fails
(the database locked past its timeout, Redis down, a bug) is logged with its
reason and tried again after a pause; only SIGTERM or Ctrl-C end the loop.
"""

import logging
import signal
import threading
from collections.abc import Callable

from django.db import close_old_connections

log = logging.getLogger(__name__)
PAUSE_AFTER_FAILURE_S = 2.0


def run_until_stopped(rounds: list[Callable[[], None]], interval: float,
                      pause: float = PAUSE_AFTER_FAILURE_S) -> None:
    """Run each of `rounds` every `interval` seconds until SIGTERM or Ctrl-C."""
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    try:
        while not stopping.is_set():
            failed = [each for each in rounds if not survived(each)]
            stopping.wait(pause if failed else interval)
    except KeyboardInterrupt:
        pass


def survived(round_: Callable[[], None]) -> bool:
    """Run one round; False (logged with its reason) when it failed."""
    try:
        close_old_connections()
        round_()
        return True
    except Exception:
        log.exception("%s failed; trying again shortly", getattr(round_, "__qualname__", round_))
        close_old_connections()  # a connection broken by the failure is not reused
        return False
