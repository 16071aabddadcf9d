"""The bundled model served on the head for the API's tests with real clients: the engine's loop runs in this
process, taking each job as the web server queues it."""

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import openai
import pytest
from django.db import connection

from clusterpanel.accounts.models import ApiToken
from jobs.engine import loop
from jobs.models import Job, JobStatus
from models_app.library.bundled import bundled_model_path
from models_app.llamacpp import cpucheck
from tests.jobs.conftest import engine_child_here, head_deployment


@pytest.fixture
def on_the_head(transactional_db, monkeypatch):
    """The bundled model on the head, its engine's loop taking each job as it is queued."""
    with serving(head_deployment(slots=2), monkeypatch) as deployment:
        yield deployment


@contextmanager
def serving(deployment, monkeypatch) -> Iterator:
    """This process as the deployment's engine, its loop run in a thread for every job queued meanwhile."""
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
        try:
            yield deployment
        finally:
            stop.set()
            server.join(timeout=60)


def client_for(web_server: str, user) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{web_server}/v1", api_key=ApiToken.issue(user, "client")[1], max_retries=0)


@pytest.fixture(scope="module")
def llama_cpp_mean():
    """llama.cpp's own `--pooling mean` over the bundled model, loaded in this process: what the panel's vectors
    must equal."""
    import llama_cpp

    with cpucheck.loading():
        llm = llama_cpp.Llama(model_path=str(bundled_model_path()), embedding=True, verbose=False, n_ctx=512,
                              pooling_type=llama_cpp.LLAMA_POOLING_TYPE_MEAN)
    yield lambda text: np.array(llm.embed(text, normalize=True))
    llm.close()


def cosine(a, b) -> float:
    a, b = np.asarray(a), np.asarray(b)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))
