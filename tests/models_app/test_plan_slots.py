"""The plan page's slots: left empty, it offers the most of 8, 4, 2, 1 that fit and says why; chosen, it plans
with them or says in words what is allowed; deploying stores the slots the page showed."""

import pytest

from models_app.library.adding import ensure_bundled
from models_app.models import Deployment
from models_app.planning import planner
from nodes.models import Node

HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"


@pytest.fixture
def model(db):
    return ensure_bundled()


@pytest.fixture
def room_for_four(model) -> Node:
    """One laptop with room for the whole model at 1024 tokens and 4 slots, not 8 (the head holds no layers)."""
    options = planner.Options(ctx=1024, slots=4)
    shape = planner.shape_of(model)
    needed = planner.stage_memory(shape, 0, shape.n_layer + 1, options, is_head=False).total
    return Node.objects.create(name="lab-1", host="10.0.0.2", username="lab", host_key=HOST_KEY, usable_memory=needed)


def plan_page(client, alice, model, node, **fields):
    client.force_login(alice)
    return client.get("/models/plan/", {"model": model.pk, "nodes": node.pk, "ctx": 1024, "mode": "fastest",
                                        **fields}).content.decode()


def test_it_offers_the_most_slots_that_fit_and_says_why(client, alice, model, room_for_four):
    page = plan_page(client, alice, model, room_for_four)
    assert "4 people at once, each up to 1024 tokens (the KV cache takes 90 MiB in all, 22 MiB each)." in page
    assert "With 8 slots of 1024 tokens each it would not fit these machines; 4 fit." in page
    assert '<input type="hidden" name="slots" value="4">' in page


def test_it_plans_with_the_slots_chosen_and_says_when_fewer_would_fit(client, alice, model, room_for_four):
    page = plan_page(client, alice, model, room_for_four, slots=2)
    assert "2 people at once, each up to 1024 tokens" in page and "would not fit" not in page
    page = plan_page(client, alice, model, room_for_four, slots=8)
    assert "with 8 slots" in page and "With 4 slots it would fit." in page
    assert "A context of 512 tokens with 8 slots would fit." in page


@pytest.mark.parametrize("slots", ["0", "65", "many"])
def test_it_refuses_slots_outside_1_to_64_in_words(client, alice, model, room_for_four, slots):
    page = plan_page(client, alice, model, room_for_four, slots=slots)
    assert "Slots must be a whole number from 1 to 64: how many people the model serves at once." in page
    assert "people at once, each" not in page


def test_it_deploys_with_the_slots_the_page_showed(client, alice, model, room_for_four):
    client.force_login(alice)
    client.post("/models/deployments/new/", {"model": model.pk, "nodes": room_for_four.pk, "ctx": 1024, "slots": 4,
                                         "mode": "fastest"})
    deployment = Deployment.objects.get()
    assert deployment.slots == deployment.plan["slots"] == 4 and deployment.ctx == deployment.plan["ctx"] == 1024
    assert deployment.plan["kv_cache"] == 4 * 30 * 2 * 1024 * 64 * 3 * 2  # 4 streams of 1024 cells, 30 layers
