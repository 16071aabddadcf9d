"""Celery's entry into laptop work: one task runs one NodeAction, start to finish; and the laptops' caches,
cleaned after each deployment and periodically (celery beat), without an action each.

Whatever goes wrong after an action is claimed, it ends FAILED with the reason.
An action a worker was running when it stopped (killed, or the machine went
down) is settled when an ordinary worker starts again, and one whose message
was lost is sent again then.
"""

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

from celery import shared_task
from celery.signals import worker_ready
from django.db import DatabaseError, connections, transaction
from django.utils import timezone
from kombu.exceptions import OperationalError

from clusterpanel.accounts.models import User
from clusterpanel.kit import celery, procs
from nodes.actions import steps as actions
from nodes.models import ActionKind, ActionStatus, LanScan, Node, NodeAction, NodeStatus
from nodes.remote import ssh
from nodes.servers import cache as rpccache
from nodes.servers import cleaning

log = logging.getLogger(__name__)
INTERRUPTED = "Interrupted: the worker stopped while it ran. Run it again."
RESEND_AFTER_S = 10  # a queued action younger than this may still have its message on the way
END_TRIES = (0.5, 1, 2, 4)  # seconds before each new try at writing an end (SQLite locked past its timeout)
# A selection's actions run side by side in one worker: each mostly waits on its laptop (an unreachable one up to 10 s
# for SSH to give up), so a pool of 4 processes taking one each kept 39 laptops waiting in rows of 4.
SIDE_BY_SIDE = 32


def enqueue(node: Node, kind: str, user: User | None = None, progress: dict | None = None) -> NodeAction:
    """`progress`: what the action starts from (a removal's `wipe`)."""
    action = NodeAction.objects.create(node=node, kind=kind, requested_by=user, progress=progress or {})
    transaction.on_commit(lambda: send(action))
    return action


def enqueue_many(nodes: list[Node], kind: str, user: User | None = None, progress: dict | None = None
                 ) -> list[NodeAction]:
    """One action per laptop, sent together to one worker that runs them side by side."""
    made = [NodeAction.objects.create(node=node, kind=kind, requested_by=user, progress=progress or {})
            for node in nodes]
    transaction.on_commit(lambda: send(*made))
    return made


def send(*actions: NodeAction) -> None:
    try:
        if len(actions) == 1:
            run_action.delay(actions[0].pk)
        else:
            run_actions.delay([action.pk for action in actions])
    except OperationalError as exc:  # the broker (Redis) is down: say so now rather than wait for a worker
        log.warning("could not send %s to a worker: %s", ", ".join(map(str, actions)), exc)
        for action in actions:
            action.finish(ActionStatus.FAILED, f"No worker could be asked to run it (the panel's Redis did not "
                                               f"answer: {exc}). Try again in a moment.", was=ActionStatus.QUEUED)


@shared_task(acks_late=True)
def run_actions(action_ids: list[int]) -> None:
    """Many laptops' actions at once, each in a thread of its own (claimed, run and ended as run_action does)."""
    with ThreadPoolExecutor(max_workers=max(1, min(len(action_ids), SIDE_BY_SIDE))) as pool:
        list(pool.map(run_in_thread, action_ids))


def run_in_thread(action_id: int) -> None:
    try:
        run_action(action_id)
    finally:
        connections.close_all()  # this thread's own


@shared_task(acks_late=True)
def run_action(action_id: int) -> str:
    action = NodeAction.objects.select_related("node").get(pk=action_id)
    if not action.claim(run_action.request.hostname or procs.this_process()):
        return "taken"
    try:
        error = perform(action)
    except Exception as exc:
        log.exception("%s failed", action)
        error = f"Unexpected error: {exc}"
    except BaseException:  # the worker is being shut down under the action
        end(action, *interrupted(action), tries=END_TRIES[:1])
        raise
    end(action, ActionStatus.FAILED if error else ActionStatus.SUCCEEDED, error)
    return action.status


def end(action: NodeAction, status: str, error: str, tries: tuple[float, ...] = END_TRIES) -> None:
    """Write the action's end, trying again a few times when the database refuses it (the write is guarded,
    so a try that did land is never written twice); logged when it still cannot be written."""
    for pause in (*tries, None):
        try:
            action.finish(status, error)
            return
        except DatabaseError as exc:
            if pause is None:
                log.error("could not record the end of %s (%s: %s): %s", action, status, error, exc)
                return
            log.warning("could not record the end of %s yet, trying again in %s s: %s", action, pause, exc)
            time.sleep(pause)


def interrupted(action: NodeAction) -> tuple[str, str]:
    """How an action cut short ends: failed, but for a removal that had already removed its laptop."""
    try:
        gone = action.kind == ActionKind.REMOVE and not Node.objects.filter(pk=action.node_id).exists()
    except DatabaseError:
        gone = False
    return (ActionStatus.SUCCEEDED, "") if gone else (ActionStatus.FAILED, INTERRUPTED)


def perform(action: NodeAction) -> str:
    """Run the action's handler; what went wrong in plain words, or "" when nothing did. One the laptop could
    not be reached for says so in its progress too (`unreachable`), for a summary of many to count."""
    node = action.node
    if node is None:  # only a removal outlives its laptop: another way removed it first
        action.report(f"{action.node_name} was already removed.")
        return ""
    try:
        # A removal goes ahead (its SSH refuses the new key, and it says so): the laptop may be gone for good.
        if node.status == NodeStatus.HOST_KEY_CHANGED and action.kind != ActionKind.REMOVE:
            raise actions.ActionError(f"{node} presents a new host key; an admin must approve it first.")
        actions.HANDLERS[action.kind](action, node)
    except ssh.HostKeyMismatch as exc:
        node.refuse_host_key(exc.presented)
        return str(exc)
    except ssh.SSHError as exc:
        node.set_status(NodeStatus.LOGIN_REFUSED if exc.permanent else NodeStatus.OFFLINE, str(exc))
        if not exc.permanent:
            action.report(unreachable=True)
        return str(exc)
    except actions.ActionError as exc:
        return str(exc)
    return ""


@worker_ready.connect
def settle_on_start(sender, **kwargs) -> None:
    """In a worker that runs node actions (not an engine worker): what the last one left behind."""
    if takes_actions(sender.app):
        settle_left_behind(sender.app, sender.hostname)


def takes_actions(app) -> bool:
    return app.conf.task_default_queue in app.amqp.queues.consume_from


def settle_left_behind(app, me: str) -> None:
    """Running actions of a worker that is gone were interrupted (this one, just starting, runs none; one
    that does not answer a ping is dead), as are those of a process outside any worker that has ended; queued
    ones may have lost their message."""
    running = NodeAction.objects.filter(status=ActionStatus.RUNNING)
    claims = set(running.values_list("claimed_by", flat=True))
    processes = {claim for claim in claims if procs.is_claim(claim)}
    alive = answering(app, claims - processes - {me, ""}) | {claim for claim in processes if procs.still_running(claim)}
    for action in running.exclude(claimed_by__in=alive):
        if action.finish(*interrupted(action)):
            log.warning("%s was interrupted by the stop of its worker %s", action, action.claimed_by or "(unknown)")
    # A scan takes a minute at most (1024 addresses, 64 at a time, 2 s each, per SSH port): one still running
    # after ten lost its worker, and its message is not sent again before the broker's hours-long timeout.
    LanScan.objects.filter(status=ActionStatus.RUNNING, created__lt=timezone.now() - timedelta(minutes=10)).update(
        status=ActionStatus.FAILED, finished=timezone.now(),
        error="The worker running this scan stopped before it finished; scan again.")
    before = timezone.now() - timedelta(seconds=RESEND_AFTER_S)
    for pk in NodeAction.objects.filter(status=ActionStatus.QUEUED, created__lt=before).values_list("pk", flat=True):
        run_action.delay(pk)  # a message that was not lost after all finds the action taken


def answering(app, workers: set[str]) -> set[str]:
    """Those of `workers` that answer a ping within 1 s (a worker runs actions in pool processes, so its main
    process answers even while it is busy)."""
    if not workers:
        return set()
    replies = celery.ping(sorted(workers), timeout=1, on=app)
    return {name for reply in replies for name in reply} & workers



def clean_soon(nodes: list[Node], why: str) -> None:
    """Clean these laptops' caches in a worker (after a deployment filled them); never fails the caller."""
    try:
        clean_caches.delay([node.pk for node in nodes], why)
    except OperationalError as exc:
        log.warning("could not ask a worker to clean the caches of %s: %s", ", ".join(map(str, nodes)), exc)


@shared_task
def clean_caches(node_ids: list[int] | None = None, why: str = "periodic clean") -> int:
    """These laptops' caches (None: every ready laptop's, as celery beat asks every CACHE_CLEAN_EVERY_S), side by
    side; how many were cleaned. No action row each: one per deployment and per hour would bury the laptops'
    actions; the outcome, or why it failed, goes on each laptop's cache state, which its page shows."""
    if node_ids is None:
        node_ids = list(Node.objects.filter(status=NodeStatus.READY).values_list("pk", flat=True))
    with ThreadPoolExecutor(max_workers=max(1, min(len(node_ids), SIDE_BY_SIDE))) as pool:
        return sum(pool.map(lambda pk: clean_in_thread(pk, why), node_ids))


def clean_in_thread(node_id: int, why: str) -> bool:
    try:
        return clean_one(node_id, why)
    finally:
        connections.close_all()  # this thread's own


def clean_one(node_id: int, why: str) -> bool:
    node = Node.objects.filter(pk=node_id).first()
    if node is None or node.status == NodeStatus.HOST_KEY_CHANGED:
        return False
    try:
        cleaning.clean(node, why)
        return True
    except Exception as exc:  # noqa: BLE001 (whatever it was, the other laptops are still cleaned, and it is told)
        if not isinstance(exc, cleaning.CleanRefused | rpccache.CacheError | ssh.SSHError):
            log.exception("cleaning %s's cache (%s) failed unexpectedly", node, why)
        log.warning("cleaning %s's cache (%s) failed: %s", node, why, exc)
        failed = {**node.cache_state, "failed": str(exc), "failed_at": timezone.now().isoformat(), "why": why}
        Node.objects.filter(pk=node.pk).update(cache_state=failed)
        return False
