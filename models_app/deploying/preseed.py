"""A deployment step: fill each laptop's rpc-server cache with the big tensors of its own layers, all laptops
at once, so that the load that follows sends only their hashes.

Worker threads (one per laptop) only copy and count bytes; this thread alone
writes the database and tells browsers, a few times a second.
"""

import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from clusterpanel.kit.broadcast import broadcast
from models_app.deploying import tensor_cache
from models_app.models import Deployment, DeploymentStage, GgufModel
from models_app.planning import words as plan_words
from nodes.remote import ssh
from nodes.remote.transfer import Progress
from nodes.servers import cache as rpccache

MAX_PARALLEL = 8


class PreseedError(Exception):
    pass


class Cancelled(Exception):
    """Another laptop failed: stop copying (the .part stays, and the next try resumes it)."""


def model_hashes(model: GgufModel) -> dict:
    """The model's tensor hashes; computed now when it has none yet, its file changed since, or they were taken
    for a llama.cpp that asks for other tensors by hash."""
    try:
        stamp, threshold = tensor_cache.file_stamp(Path(model.path)), tensor_cache.hash_threshold()
        known = model.tensor_hashes or {}
        if known.get("file") == stamp and known.get("threshold", tensor_cache.HASH_THRESHOLD) == threshold:
            return model.tensor_hashes
        model.tensor_hashes = tensor_cache.hash_tensors(Path(model.path), threshold=threshold)
    except OSError as exc:
        raise PreseedError(f"Cannot read the model file {model.path}: {exc.strerror}") from None
    model.save(update_fields=["tensor_hashes"])
    return model.tensor_hashes


def needed(deployment: Deployment, hashes: dict | None = None) -> list[list[rpccache.Tensor]]:
    """For each laptop in pipeline order, the cached tensors llama.cpp will ask it for by hash: one per file, as
    tensors of the same bytes (norms of ones, biases of zeros) are one file in the cache. `hashes`: the model's
    (model_hashes), else taken now."""
    model, plan = deployment.model, deployment.plan
    devices = tensor_cache.tensors_per_device(
        (hashes or model_hashes(model))["tensors"], "output.weight" in model.other_tensors, model.n_layer,
        plan["n_gpu_layers"], tuple(plan["tensor_split"]))
    # A laptop's devices share its cache: their tensors go in one list (stage k is RPC device k - 1).
    laptops = [{name: t for k in run for name, t in devices[k - 1].items()}
               for run in plan_words.laptop_runs(plan["stages"])]
    return [one_per_file(found) for found in laptops]


def one_per_file(found: dict[str, dict]) -> list[rpccache.Tensor]:
    files: dict[str, rpccache.Tensor] = {}
    for name, t in sorted(found.items()):
        files.setdefault(t["hash"], rpccache.Tensor(name, t["hash"], t["offset"], t["size"]))
    return list(files.values())


class Board:
    """Each laptop's progress, written by its thread and read by this one."""

    def __init__(self, stages: list[DeploymentStage]) -> None:
        self.lock, self.changed = threading.Lock(), set()
        self.rows = {s.position: {"state": "waiting", "node": s.node.name} for s in stages}

    def update(self, position: int, message: str = "", **fields) -> None:
        with self.lock:
            self.rows[position].update(fields, **({"message": message} if message else {}))
            self.changed.add(position)

    def take(self) -> dict[int, dict]:
        with self.lock:
            taken = {p: dict(self.rows[p]) for p in self.changed}
            self.changed.clear()
            return taken


def laptop_lock(node_id: int):
    """One cache filler (or cleaner, nodes/servers/cleaning.py) per laptop at a time."""
    return rpccache.locked(node_id, 3600, "Another deployment has been filling this laptop's cache for an hour.")


def fill_one(stage: DeploymentStage, target: ssh.SSHTarget, model: Path, tensors: list[rpccache.Tensor],
             board: Board, stop: threading.Event) -> rpccache.Seeded:
    counter = Progress(lambda message="", **f: board.update(stage.position, **f), "cache")
    with laptop_lock(stage.node_id) as lock:
        renewed = [time.monotonic()]

        def progress(done: int, total: int) -> None:
            if stop.is_set():
                raise Cancelled()
            if time.monotonic() - renewed[0] > rpccache.LOCK_TTL_S / 4:
                lock.reacquire()
                renewed[0] = time.monotonic()
            counter(done, total)

        board.update(stage.position, state="copying")
        return rpccache.seed(target, stage.node.install_dir, model, tensors, progress)


def fill_caches(deployment: Deployment, stages: list[DeploymentStage]) -> dict[int, rpccache.Seeded]:
    """Copy every laptop's missing tensors in parallel; PreseedError naming the laptops that failed."""
    per_stage = needed(deployment)
    targets = {stage.position: stage.node.ssh_target() for stage in stages}
    board, stop, started = Board(stages), threading.Event(), time.monotonic()
    for stage in stages:
        tensors = per_stage[stage.position]
        board.update(stage.position, tensors=len(tensors), cached_bytes=sum(t.size for t in tensors))
    with ThreadPoolExecutor(min(len(stages), MAX_PARALLEL) or 1, thread_name_prefix="preseed") as pool:
        futures = {stage.position: pool.submit(fill_one, stage, targets[stage.position], Path(deployment.model.path),
                                               per_stage[stage.position], board, stop) for stage in stages}
        while not all(f.done() for f in futures.values()):
            if any(f.done() and f.exception() for f in futures.values()):
                stop.set()
            publish(deployment, stages, board)
            time.sleep(0.25)
    results, errors = finish(futures, stages, board, time.monotonic() - started)
    publish(deployment, stages, board)
    if errors:
        raise PreseedError("Could not fill the rpc-server cache on " + "; ".join(errors))
    return results


def finish(futures: dict[int, Future], stages: list[DeploymentStage], board: Board,
           seconds: float) -> tuple[dict[int, rpccache.Seeded], list[str]]:
    results, errors = {}, []
    for stage in stages:
        error = futures[stage.position].exception()
        if error is None:
            seeded = results[stage.position] = futures[stage.position].result()
            board.update(stage.position, state="done", sent=seeded.sent, already=seeded.skipped,
                         copied_files=seeded.files, seconds=round(seconds, 1))
        elif isinstance(error, Cancelled):
            board.update(stage.position, state="cancelled", message="stopped: another laptop failed")
        else:
            errors.append(f"{stage.node}: {error}")
            board.update(stage.position, state="failed", message=str(error))
            if not isinstance(error, (ssh.SSHError, rpccache.CacheError, PreseedError)):
                raise error
    return results, errors


def publish(deployment: Deployment, stages: list[DeploymentStage], board: Board) -> None:
    by_position = {stage.position: stage for stage in stages}
    for position, row in board.take().items():
        stage = by_position[position]
        stage.preseed = row
        stage.save(update_fields=["preseed"])
        broadcast(f"deployment_{deployment.pk}", "deployment.preseed", {"position": position, **row})
