"""Celery's entry into laptop work: one task runs one NodeAction, start to finish."""

import logging

from celery import shared_task
from django.db import transaction

from clusterpanel.models import User
from nodes import actions, ssh
from nodes.models import ActionStatus, Node, NodeAction, NodeStatus

log = logging.getLogger(__name__)


def enqueue(node: Node, kind: str, user: User | None = None) -> NodeAction:
    action = NodeAction.objects.create(node=node, kind=kind, requested_by=user)
    transaction.on_commit(lambda: run_action.delay(action.pk))
    return action


@shared_task(acks_late=True)
def run_action(action_id: int) -> str:
    action = NodeAction.objects.select_related("node").get(pk=action_id)
    if not action.claim():
        return "taken"
    node = action.node
    try:
        if node.status == NodeStatus.HOST_KEY_CHANGED:
            raise actions.ActionError(f"{node} presents a new host key; an admin must approve it first.")
        actions.HANDLERS[action.kind](action, node)
    except ssh.HostKeyMismatch as exc:
        node.refuse_host_key(exc.presented)
        action.finish(ActionStatus.FAILED, str(exc))
    except ssh.SSHError as exc:
        node.set_status(NodeStatus.LOGIN_REFUSED if exc.permanent else NodeStatus.OFFLINE, str(exc))
        action.finish(ActionStatus.FAILED, str(exc))
    except actions.ActionError as exc:
        action.finish(ActionStatus.FAILED, str(exc))
    except Exception as exc:
        log.exception("%s failed", action)
        action.finish(ActionStatus.FAILED, f"Unexpected error: {exc}")
        raise
    else:
        action.finish(ActionStatus.SUCCEEDED)
    return action.status
