"""What recovery does not wait for before it re-plans: a laptop that does not answer over SSH (asking it again
would wait out SSH's timeout), and a laptop that was kept after its rpc-server died less than ten minutes ago
(an out-of-memory kill looks like any kill -9, and keeping it again would fail every job on it); and how the
deployment page says so."""

import time

from jobs.engine import comeback, recovery
from jobs.models import Job, JobKind, JobStatus
from models_app.models import DeploymentStatus
from nodes.models import Node, RpcServer, ServerStatus

HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"


def on_laptops(deployment, names: list[str]) -> list:
    """Its layers on laptops that exist only in the database, each with a server the supervisor called running."""
    for position, name in enumerate(names):
        node = Node.objects.create(name=name, host=f"10.0.0.{position + 2}", username="lab", host_key=HOST_KEY,
                                   usable_memory=1 << 30)
        server = RpcServer.objects.create(node=node, status=ServerStatus.RUNNING, local_port=40000 + position, pid=10)
        deployment.stages.create(position=position, node=node, first_layer=position, layer_count=1, memory={},
                                 server=server)
    return list(deployment.stages.select_related("node", "server"))


def never_asked(*args, **kwargs):
    raise AssertionError("a laptop was asked over SSH")


def test_a_laptop_that_does_not_answer_is_not_waited_for(ready, bob, monkeypatch):
    on_laptops(ready, ["lab-1", "lab-2"])
    monkeypatch.setattr(comeback.rpcserver, "state", never_asked)
    job = Job.objects.create(kind=JobKind.COMPLETION, deployment=ready, user=bob, prompt="hi",
                             params={"max_tokens": 4}, status=JobStatus.RUNNING)
    started = time.monotonic()
    assert not recovery.all_back(ready, {"lab-2": f"{recovery.NO_ANSWER} (timed out)"}, [job])
    assert time.monotonic() - started < 1
    job.refresh_from_db()
    assert job.status == JobStatus.RUNNING, "left to the re-plan, which fails it naming the laptop"
    ready.refresh_from_db()
    assert ready.status == DeploymentStatus.READY and ready.revision == 1


def test_a_laptop_kept_a_few_minutes_ago_is_left_out_this_time_saying_why(ready, monkeypatch):
    stages = on_laptops(ready, ["lab-1", "lab-2"])
    monkeypatch.setattr(comeback.rpcserver, "state", never_asked)
    ready.plan = comeback.remember(ready, ready.plan, ["lab-2"])
    ready.plan[comeback.KEPT]["lab-2"] -= 300  # kept five minutes ago
    assert comeback.back_again(ready, stages, ["lab-2"]) == []
    words = comeback.in_words(ready, [], ["lab-2"])
    assert "lab-2 left out: its rpc-server died again within 10 minutes of being kept" in words


def test_a_laptop_kept_long_ago_may_be_kept_again(ready):
    ready.plan = comeback.remember(ready, ready.plan, ["lab-2"])
    ready.plan[comeback.KEPT]["lab-2"] -= comeback.KEEP_AGAIN_AFTER_S + 1
    assert not comeback.kept_lately(ready, "lab-2")
    assert comeback.remember(ready, ready.plan, ["lab-1"])[comeback.KEPT].keys() == {"lab-1"}, "old marks go"
