"""Laptops by script, on simulated laptops through the real web server: register with the host key confirmed
in a second call, start an action and follow it live to its end, start/stop an rpc-server and read its log,
read metrics, change and remove a laptop. A plain user reaches none of it."""

import json
from pathlib import Path

import requests

from clusterpanel.accounts.models import ApiToken
from nodes.models import Node, NodeStatus, RpcServer, ServerStatus
from tests.conftest import wait_until

TIMEOUT = 120


def api(web_server: str, user):
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {ApiToken.issue(user, 'tests')[1]}"
    session.base = f"{web_server}/api"
    return session


def events(session, url: str) -> list[dict]:
    """Every state a Server-Sent Events stream sends until it closes."""
    seen = []
    with session.get(url, stream=True, timeout=TIMEOUT) as answer:
        assert answer.status_code == 200 and answer.headers["Content-Type"].startswith("text/event-stream")
        for line in answer.iter_lines(decode_unicode=True):
            if line.startswith("data: "):
                seen.append(json.loads(line.removeprefix("data: ")))
    return seen


def test_a_script_registers_a_laptop_confirming_its_host_key_and_follows_its_probe(
        lan, web_server, celery_worker, alice, bob):
    laptop, other = lan(3).laptops[:2]
    admin = api(web_server, alice)
    shown = admin.post(f"{admin.base}/nodes/host-key/", json={"host": laptop.address}).json()
    assert shown == {"host": laptop.address, "port": 22, "fingerprint": laptop.host_key_fingerprint}

    body = {"name": "desk-9", "host": laptop.address, "username": laptop.user, "auth": "password",
            "password": laptop.password, "host_key_fingerprint": other.host_key_fingerprint}
    refused = admin.post(f"{admin.base}/nodes/", json=body)
    assert refused.status_code == 409 and refused.json()["field"] == "host_key_fingerprint", refused.text
    assert laptop.host_key_fingerprint in refused.json()["error"] and not Node.objects.exists()
    wrong = admin.post(f"{admin.base}/nodes/", json={**body, "host_key_fingerprint": shown["fingerprint"],
                                                     "password": "not it"})
    assert wrong.status_code == 400 and "desk-9 was not added" in wrong.json()["error"] and not Node.objects.exists()
    assert api(web_server, bob).post(f"{admin.base}/nodes/", json=body).status_code == 403

    made = admin.post(f"{admin.base}/nodes/", json={**body, "host_key_fingerprint": shown["fingerprint"]})
    assert made.status_code == 201, made.text
    node = made.json()
    assert node["name"] == "desk-9" and node["host_key_fingerprint"] == laptop.host_key_fingerprint
    probe = node["actions"][0]
    assert probe["kind"] == "probe" and probe["events"].endswith(f"/api/nodes/desk-9/actions/{probe['id']}/events/")

    seen = events(admin, f"{web_server}{probe['events']}")
    assert seen[-1]["status"] == "succeeded" and "GiB RAM" in seen[-1]["message"], seen
    # A snapshot comes at each change (a running probe's message too), so a state may repeat; it never goes back.
    order = ["queued", "running", "succeeded"]
    assert [order.index(s["status"]) for s in seen] == sorted(order.index(s["status"]) for s in seen), seen
    detail = admin.get(f"{web_server}{probe['url']}").json()
    assert detail["status"] == "succeeded" and detail["finished"]
    full = admin.get(f"{admin.base}/nodes/desk-9/").json()
    assert full["status"] == NodeStatus.READY and full["facts"]["hostname"] == laptop.netns
    assert Node.objects.get(name="desk-9").private_key == "", "the password was used once, not kept"


def test_a_script_runs_actions_servers_and_reads_metrics(lan, web_server, celery_worker, supervisor, collector,
                                                        alice, bob):
    the_lan = lan(3)
    laptop = the_lan.laptops[2]
    Node.objects.create(name="desk-3", host=laptop.address, username=laptop.user, host_key=laptop.host_key,
                        private_key=Path(the_lan.key_path).read_text())
    admin = api(web_server, alice)
    started = admin.post(f"{admin.base}/nodes/desk-3/actions/", json={"kind": "install_runtime"})
    assert started.status_code == 202 and started.json()["status"] == "queued", started.text
    assert events(admin, f"{web_server}{started.json()['events']}")[-1]["status"] == "succeeded"
    assert admin.post(f"{admin.base}/nodes/desk-3/actions/", json={"kind": "reboot"}).json()["field"] == "kind"

    server = admin.put(f"{admin.base}/nodes/desk-3/servers/50070/", json={"state": "start"})
    assert server.status_code == 200 and server.json()["wanted"], server.text
    wait_until(lambda: RpcServer.objects.get(port=50070).status == ServerStatus.RUNNING, 60, "the server running")
    listed = admin.get(f"{admin.base}/nodes/desk-3/servers/").json()
    assert [(s["port"], s["status"]) for s in listed] == [(50070, "running")]
    assert "loaded CPU backend" in admin.get(f"{admin.base}/nodes/desk-3/servers/50070/log/").json()["log"]
    assert admin.put(f"{admin.base}/nodes/desk-3/servers/80/", json={"state": "start"}).json()["field"] == "port"
    admin.put(f"{admin.base}/nodes/desk-3/servers/50070/", json={"state": "stop"})
    wait_until(lambda: RpcServer.objects.get(port=50070).status == ServerStatus.STOPPED, 60, "the server stopped")

    latest = wait_until(lambda: admin.get(f"{admin.base}/nodes/desk-3/metrics/latest/").json().get("cpu")
                        is not None and admin.get(f"{admin.base}/nodes/desk-3/metrics/latest/").json(), 30,
                        "a sample")
    assert {"t", "cpu", "ram_used"} <= set(latest)
    history = admin.get(f"{admin.base}/nodes/desk-3/metrics/").json()
    assert history["resolution"] == "second" and len(history["samples"]) >= 1
    assert admin.get(f"{admin.base}/nodes/desk-3/metrics/", params={"since": "2026-01-01T00:00:00"}
                     ).json()["field"] == "since"

    changed = admin.patch(f"{admin.base}/nodes/desk-3/", json={"usable_gb": 1.5, "pipeline_order": 2})
    assert changed.status_code == 200, changed.text
    assert (changed.json()["usable_memory"], changed.json()["pipeline_order"]) == (round(1.5 * 2**30), 2)
    assert admin.patch(f"{admin.base}/nodes/desk-3/", json={"usable_gb": 0.01}).json()["field"] == "usable_gb"

    user = api(web_server, bob)
    for answer in (user.get(f"{admin.base}/nodes/desk-3/"), user.get(f"{admin.base}/nodes/desk-3/metrics/latest/"),
                   user.delete(f"{admin.base}/nodes/desk-3/")):
        assert answer.status_code == 403, answer.text
    removed = admin.delete(f"{admin.base}/nodes/desk-3/")
    assert removed.status_code == 200 and removed.json()["summary"].startswith("desk-3 removed."), removed.text
    assert not Node.objects.exists()
    assert admin.get(f"{admin.base}/nodes/desk-3/").status_code == 404
