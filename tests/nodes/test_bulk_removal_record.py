"""A removal's record outlives its laptop: one cut short by its worker's stop after the laptop was gone ends as
done (the laptop is gone), one cut short before that as interrupted; one whose laptop went another way before
it ran says it was already removed. The laptop's other actions go with it."""

import pytest

from clusterpanel.kit.celery import app
from nodes.models import ActionKind, ActionStatus, Node, NodeAction
from nodes.tasks import INTERRUPTED, run_action, settle_left_behind
from tests.rows import HOST_KEY


@pytest.mark.django_db
def test_a_removal_cut_short_after_its_laptop_went_ends_as_done():
    still_there = Node.objects.create(name="lab-1", host="192.0.2.1", username="lab", host_key=HOST_KEY)
    gone_one = Node.objects.create(name="lab-9", host="192.0.2.9", username="lab", host_key=HOST_KEY)
    removed = NodeAction.objects.create(node=gone_one, kind=ActionKind.REMOVE, status=ActionStatus.RUNNING,
                                        claimed_by="gone@tests")
    cut = NodeAction.objects.create(node=still_there, kind=ActionKind.REMOVE, status=ActionStatus.RUNNING,
                                    claimed_by="gone@tests")
    gone_one.delete()
    settle_left_behind(app, "me@tests")
    removed.refresh_from_db()
    cut.refresh_from_db()
    assert (removed.node, removed.laptop_name, removed.status, removed.error) == (None, "lab-9", "succeeded", "")
    assert (cut.status, cut.error) == (ActionStatus.FAILED, INTERRUPTED)


@pytest.mark.django_db
def test_a_removal_whose_laptop_went_another_way_before_it_ran_says_so():
    node = Node.objects.create(name="lab-3", host="192.0.2.3", username="lab", host_key=HOST_KEY)
    action = NodeAction.objects.create(node=node, kind=ActionKind.REMOVE)
    node.delete()
    run_action(action.pk)
    action.refresh_from_db()
    assert (action.status, action.message) == (ActionStatus.SUCCEEDED, "lab-3 was already removed.")


@pytest.mark.django_db
def test_a_laptop_deleted_takes_its_other_actions_and_leaves_its_removals():
    node = Node.objects.create(name="lab-4", host="192.0.2.4", username="lab", host_key=HOST_KEY)
    probe = NodeAction.objects.create(node=node, kind=ActionKind.PROBE, status=ActionStatus.FAILED)
    removal = NodeAction.objects.create(node=node, kind=ActionKind.REMOVE, status=ActionStatus.RUNNING)
    node.delete()
    assert not NodeAction.objects.filter(pk=probe.pk).exists(), "a dashboard's failures need their laptop"
    kept = NodeAction.objects.get(pk=removal.pk)
    assert (kept.node_id, kept.laptop_name) == (None, "lab-4")
