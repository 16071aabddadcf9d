"""Celery's entry into laptop work: one task runs one NodeAction, start to finish.

Whatever goes wrong after an action is claimed, it ends FAILED with the reason.
An action a worker was running when it stopped (killed, or the machine went
down) is settled when an ordinary worker starts again, and one whose message
was lost is sent again then.
"""

import logging
from datetime import timedelta

from celery import shared_task
from celery.signals import worker_ready
from django.db import transaction
from django.utils import timezone
from kombu.exceptions import OperationalError

from clusterpanel.models import User
from nodes import actions, ssh
from nodes.models import ActionStatus, Node, NodeAction, NodeStatus

log = logging.getLogger(__name__)
INTERRUPTED = "Interrupted: the worker stopped while it ran. Run it again."
RESEND_AFTER_S = 10  # a queued action younger than this may still have its message on the way


def enqueue(node: Node, kind: str, user: User | None = None) -> NodeAction:
    action = NodeAction.objects.create(node=node, kind=kind, requested_by=user)
    transaction.on_commit(lambda: send(action))
    return action


def send(action: NodeAction) -> None:
    try:
        run_action.delay(action.pk)
    except OperationalError as exc:  # the broker (Redis) is down: say so now rather than wait for a worker
        log.warning("could not send %s to a worker: %s", action, exc)
        action.finish(ActionStatus.FAILED, f"No worker could be asked to run it (the panel's Redis did not "
                                           f"answer: {exc}). Try again in a moment.")


@shared_task(acks_late=True)
def run_action(action_id: int) -> str:
    action = NodeAction.objects.select_related("node").get(pk=action_id)
    if not action.claim():
        return "taken"
    try:
        error = perform(action)
    except Exception as exc:
        log.exception("%s failed", action)
        error = f"Unexpected error: {exc}"
    except BaseException:  # the worker is being shut down under the action
        action.finish(ActionStatus.FAILED, INTERRUPTED)
        raise
    action.finish(ActionStatus.FAILED if error else ActionStatus.SUCCEEDED, error)
    return action.status


def perform(action: NodeAction) -> str:
    """Run the action's handler; what went wrong in plain words, or "" when nothing did."""
    node = action.node
    try:
        if node.status == NodeStatus.HOST_KEY_CHANGED:
            raise actions.ActionError(f"{node} presents a new host key; an admin must approve it first.")
        actions.HANDLERS[action.kind](action, node)
    except ssh.HostKeyMismatch as exc:
        node.refuse_host_key(exc.presented)
        return str(exc)
    except ssh.SSHError as exc:
        node.set_status(NodeStatus.LOGIN_REFUSED if exc.permanent else NodeStatus.OFFLINE, str(exc))
        return str(exc)
    except actions.ActionError as exc:
        return str(exc)
    return ""


@worker_ready.connect
def settle_on_start(sender, **kwargs) -> None:
    """In a worker that runs node actions (not an engine worker): what the last one left behind."""
    if takes_actions(sender.app):
        settle_left_behind()


def takes_actions(app) -> bool:
    return app.conf.task_default_queue in app.amqp.queues.consume_from


def settle_left_behind() -> None:
    """Running actions were interrupted (no other worker runs them); queued ones may have lost their message."""
    for action in NodeAction.objects.filter(status=ActionStatus.RUNNING):
        if action.fail_if_running(INTERRUPTED):
            log.warning("%s was interrupted by the worker's stop", action)
    before = timezone.now() - timedelta(seconds=RESEND_AFTER_S)
    for pk in NodeAction.objects.filter(status=ActionStatus.QUEUED, created__lt=before).values_list("pk", flat=True):
        run_action.delay(pk)  # a message that was not lost after all finds the action taken
