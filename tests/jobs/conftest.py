"""Deployments for job tests: `ready`, a row that looks ready (no laptops, no engine) for API tests without a
LAN; `cluster`, the bundled model really deployed across three simulated laptops with its engine; token headers."""

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from clusterpanel.accounts.models import ApiToken
from jobs.queue import ending
from models_app.library.adding import ensure_bundled
from models_app.models import Deployment, DeploymentStatus, GgufModel
from nodes.models import ActionKind
from tests.jobs.cluster import deploy_bundled, end_engines, engine_ready
from tests.jobs.standins import engine
from tests.nodes.laptops import register_all


@pytest.fixture
def cancels_forgotten() -> Iterator[None]:
    """Stops asked in Redis (jobs/queue/ending.cancel_key) gone after the test: the next test's jobs reuse
    the same ids in a fresh database, and one would be taken for stopped."""
    yield
    from jobs.queue import stream

    client = stream.store()
    for key in client.scan_iter(match=ending.cancel_key("*")):
        client.delete(key)


@pytest.fixture
def ready(db) -> Deployment:
    model = GgufModel.objects.create(name="tiny", path="/nonexistent/tiny.gguf", size=1, architecture="llama",
                                     n_layer=2, n_embd=8, n_head=1, n_head_kv=1, context_length=2048,
                                     vocab_size=32, file_type="Q4_1")
    plan = {"mode": "even", "n_gpu_layers": 0, "tensor_split": [], "tokens_per_second": 1.0, "bottleneck": "head",
            "stages": [{"machine": "head", "first": 0, "count": 2, "memory": {}, "usable": None}]}
    return Deployment.objects.create(model=model, ctx=1024, plan=plan, status=DeploymentStatus.READY,
                                     is_default=True)


@pytest.fixture
def sent(monkeypatch) -> list[tuple]:
    """What would be sent to workers (jobs/task_messages.py), caught here: tests of the scheduler run no worker."""
    from jobs import task_messages

    caught = []
    monkeypatch.setattr(task_messages, "send", lambda task, args, **options: caught.append((task, args)))
    return caught


@pytest.fixture
def replicas(ready) -> tuple[Deployment, Deployment]:
    """`ready` and a second deployment of its model "tiny" (replicas), both idle with two slots, rows only."""
    ready.engine, ready.slots = engine(), 2
    ready.save(update_fields=["engine", "slots"])
    return ready, Deployment.objects.create(model=ready.model, ctx=1024, plan=ready.plan, slots=2, engine=engine(),
                                            status=DeploymentStatus.READY)


def as_engine_child(deployment: Deployment, monkeypatch) -> None:
    """This process as the deployment's engine child (jobs/engine/child.py), with nothing loaded yet."""
    from jobs.engine import child

    monkeypatch.setenv(child.ENV_DEPLOYMENT, str(deployment.pk))
    monkeypatch.setenv(child.ENV_REVISION, str(deployment.revision))
    for name, value in {"engine": None, "out": None, "cancels": None, "retired": False}.items():
        monkeypatch.setattr(child.State, name, value)


def head_deployment(slots: int = 1, ctx: int = 512) -> Deployment:
    """The bundled model with every layer on the panel's machine: no laptops needed to run it for real."""
    model = ensure_bundled()
    plan = {"mode": "even", "n_gpu_layers": 0, "tensor_split": [], "tokens_per_second": 1.0, "bottleneck": "head",
            "stages": [{"machine": "head", "first": 0, "count": model.n_layer + 1, "memory": {}, "usable": None}]}
    return Deployment.objects.create(model=model, ctx=ctx, slots=slots, plan=plan, status=DeploymentStatus.READY)


def head_engine(ctx: int, slots: int):
    """The bundled model loaded in this process, every layer on the head: the engine without laptops."""
    from jobs.engine.loaded_model import Engine
    from models_app.library.bundled import bundled_model_path

    loaded = Engine(str(bundled_model_path()), [], 0, [], ctx, [], slots=slots)
    loaded.load(lambda progress: None)
    return loaded


@contextmanager
def engine_child_here(deployment: Deployment, monkeypatch) -> Iterator[None]:
    """This process as the deployment's engine child (`as_engine_child`), its Redis watch ended afterwards."""
    from jobs.engine import child

    as_engine_child(deployment, monkeypatch)
    yield
    if child.State.cancels is not None:  # its Redis subscriber thread would outlive the test
        child.State.cancels.thread.stop()
        child.State.cancels.thread.join(5)
        child.State.cancels.pubsub.close()


def bearer(user) -> dict:
    """Test-client headers carrying a new token of `user`."""
    return {"HTTP_AUTHORIZATION": f"Bearer {ApiToken.issue(user, 'tests')[1]}"}


@pytest.fixture
def cluster_ctx() -> int:
    """The `cluster` deployment's context; a test module overrides this fixture for another."""
    return 1024


@pytest.fixture
def cluster_slots() -> int:
    """How many jobs the `cluster` deployment's engine runs at once; a test module overrides this fixture."""
    return 1


@pytest.fixture
def cluster(lan, transactional_db, supervisor, bob, cluster_ctx, cluster_slots) -> Deployment:
    """The bundled model across three simulated laptops, the chat page's default, its engine loaded. The
    supervisor, and with it every engine, stops at the end."""
    deployment = deploy_bundled(register_all(lan(3), then=ActionKind.PROBE), ctx=cluster_ctx, slots=cluster_slots)
    deployment.is_default = True
    deployment.save(update_fields=["is_default"])
    engine_ready(deployment)
    yield deployment
    supervisor.terminate()
    supervisor.wait(30)
    end_engines()
