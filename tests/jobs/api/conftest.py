"""The bundled model served on the head for the API's tests with real clients: the engine's loop runs in this
process, taking each job as the web server queues it."""

import threading

import openai
import pytest
from django.db import connection

from clusterpanel.accounts.models import ApiToken
from jobs.engine import loop
from jobs.models import Job, JobStatus
from tests.jobs.conftest import engine_child_here, head_deployment


@pytest.fixture
def on_the_head(transactional_db, monkeypatch):
    """The bundled model on the head, its engine's loop taking each job as it is queued."""
    deployment = head_deployment(slots=2)
    with engine_child_here(deployment, monkeypatch):
        stop = threading.Event()

        def serve() -> None:
            try:
                while not stop.is_set():
                    waiting = Job.objects.filter(status=JobStatus.QUEUED).values_list("pk", flat=True).first()
                    if waiting:
                        loop.run(waiting)
                    else:
                        stop.wait(0.05)
            finally:
                connection.close()

        server = threading.Thread(target=serve, daemon=True)
        server.start()
        yield deployment
        stop.set()
        server.join(timeout=60)


def client_for(web_server: str, user) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{web_server}/v1", api_key=ApiToken.issue(user, "client")[1], max_retries=0)
