"""A task that only waits, for tests that need a worker busy with something (`celery worker -I tests.celery_sleep`)."""

import time

from clusterpanel.kit.celery import app


@app.task(name="tests.sleep")
def sleep(seconds: float) -> None:
    time.sleep(seconds)
