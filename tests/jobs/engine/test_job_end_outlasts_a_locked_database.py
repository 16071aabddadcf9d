"""A job's end is stored even when the database refuses writes for longer than its lock timeout: the engine tries
again rather than leave the job RUNNING (and its conversation "still coming") forever."""

import threading
import time

from jobs.engine import child
from jobs.models import Job, JobKind, JobStatus
from tests.nodes.trouble import locked_database

LOCKED_S = 26  # past SQLite's 20 s timeout (settings.py): the first write fails with "database is locked"


def test_it_stores_the_end_once_the_database_takes_writes_again(transactional_db, ready, bob):
    job = Job.objects.create(kind=JobKind.CHAT, deployment=ready, user=bob, status=JobStatus.RUNNING, attempts=1,
                             messages=[{"role": "user", "content": "hi"}])
    released = threading.Event()

    def hold_the_lock() -> None:
        with locked_database():
            time.sleep(LOCKED_S)
        released.set()

    holder = threading.Thread(target=hold_the_lock)
    holder.start()
    time.sleep(0.5)  # the lock is held before the engine writes
    try:
        child.finish(job, JobStatus.SUCCEEDED, output="Hello!", finish_reason="stop")
    finally:
        holder.join()
    assert released.is_set()
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCEEDED and job.output == "Hello!"
