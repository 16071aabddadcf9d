"""A script acts on a selection of simulated laptops at once, one of them unplugged, through the real web server
and a real worker: every laptop gets its own action, the whole selection is followed in one stream, the
reachable laptops succeed, the unplugged one says plainly that it could not be reached, and the summary counts
them. A removal's records outlive the laptops it removed."""

from nodes.models import ActionKind, Node, NodeAction, NodeStatus, RpcServer, ServerStatus
from tests.nodes.laptops import register, set_link
from tests.nodes.test_laptops_api import api, events

NAMES = ["desk-10", "desk-2", "desk-9"]  # desk-2 is the LAN's laptop 2, the one unplugged


def selection_of(the_lan) -> list[Node]:
    return [register(the_lan, laptop, name) for laptop, name in zip(the_lan.laptops, NAMES, strict=False)]


def test_it_probes_a_selection_and_says_plainly_which_laptop_was_unreachable(lan, web_server, celery_worker, alice):
    the_lan = lan(3)
    selection_of(the_lan)
    admin = api(web_server, alice)
    set_link(the_lan, 2, "down")
    try:
        started = admin.post(f"{admin.base}/nodes/actions/", json={"action": "probe", "nodes": NAMES})
        assert started.status_code == 202, started.text
        body = started.json()
        assert [a["node"] for a in body["actions"]] == ["desk-2", "desk-9", "desk-10"]
        assert {a["kind"] for a in body["actions"]} == {"probe"} and not body["ended"]
        again = admin.post(f"{admin.base}/nodes/actions/", json={"action": "probe", "nodes": ["desk-9", "desk-2"]})
        assert again.status_code == 400 and "desk-2 is busy (probe" in again.json()["error"], again.text
        seen = events(admin, f"{web_server}{body['events']}")
    finally:
        set_link(the_lan, 2, "up")

    last = seen[-1]
    assert len(seen) >= 2 and not seen[0]["ended"], "the stream showed the selection before it ended"
    assert last["ended"] and last["counts"] == {"queued": 0, "running": 0, "succeeded": 2, "failed": 1}
    each = {action["node"]: action for action in last["actions"]}
    unplugged = the_lan.laptops[1].address
    assert each["desk-2"]["error"].startswith(f"Cannot reach {unplugged}:22"), each["desk-2"]
    assert each["desk-2"]["progress"]["unreachable"] is True
    assert all("GiB RAM" in each[name]["message"] for name in ("desk-9", "desk-10"))
    assert last["summary"] == "2 probed; 1 unreachable: desk-2."
    assert admin.get(f"{web_server}{body['url']}").json()["summary"] == last["summary"]
    states = dict(Node.objects.values_list("name", "status"))
    assert states == {"desk-2": NodeStatus.OFFLINE, "desk-9": NodeStatus.READY, "desk-10": NodeStatus.READY}


def test_it_removes_a_selection_even_the_unreachable_laptop_and_keeps_the_records(lan, web_server, celery_worker,
                                                                                  alice):
    the_lan = lan(3)
    desk_10, desk_2, desk_9 = selection_of(the_lan)
    # A server row to stop makes the removal reach for the laptop (a stopped one: nothing runs there).
    RpcServer.objects.create(node=desk_2, port=50090, wanted=False, status=ServerStatus.STOPPED)
    admin = api(web_server, alice)
    set_link(the_lan, 2, "down")
    try:
        started = admin.post(f"{admin.base}/nodes/actions/", json={"action": "remove", "nodes": ["desk-9", "desk-2"]})
        assert started.status_code == 202, started.text
        last = events(admin, f"{web_server}{started.json()['events']}")[-1]
    finally:
        set_link(the_lan, 2, "up")

    assert last["counts"]["succeeded"] == 2, last
    assert last["summary"] == ("2 removed; 1 of them could not be reached, so what the panel started there may "
                               "still run: desk-2.")
    each = {action["node"]: action for action in last["actions"]}
    assert each["desk-2"]["message"].startswith("desk-2 removed.") and "could not be reached" in each["desk-2"][
        "message"]
    assert each["desk-9"]["message"] == "desk-9 removed."
    assert list(Node.objects.values_list("name", flat=True)) == ["desk-10"]
    kept = NodeAction.objects.filter(kind=ActionKind.REMOVE, node=None).order_by("node_name")
    assert [(a.node_name, a.status) for a in kept] == [("desk-2", "succeeded"), ("desk-9", "succeeded")]
    assert admin.get(f"{web_server}{started.json()['url']}").json()["summary"] == last["summary"]
