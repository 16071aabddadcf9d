"""A log that tells an outage once: one line when something first fails for want of Redis, one line with a count
when it works again. Without it a 20 s restart wrote a line per token, a traceback per open socket and one per
laptop per retry, and the line that mattered was lost among them."""

import logging
import threading
import time


class Outage:
    def __init__(self, log: logging.Logger, what: str) -> None:
        self.log, self.what = log, what
        self.failures, self.since = 0, 0.0
        self.lock = threading.Lock()  # the collector's laptop threads share one

    def failed(self, exc: BaseException) -> None:
        with self.lock:
            first, self.failures = not self.failures, self.failures + 1
            if first:
                self.since = time.monotonic()
        if first:
            self.log.warning("%s failed: %s (said once until it works again)", self.what, describe(exc))

    def over(self) -> None:
        if not self.failures:  # the common case costs no lock
            return
        with self.lock:
            failures, self.failures = self.failures, 0
        if failures:
            self.log.warning("%s works again, after %d failure%s over %.1f s", self.what, failures,
                             "" if failures == 1 else "s", time.monotonic() - self.since)


def describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
