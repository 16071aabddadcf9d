"""A script restarts the rpc-servers of a selection of laptops at once: the supervisor restarts each (new
processes, running again), the action ends when it has, and a laptop with no server says it had none."""

from nodes.models import RpcServer, ServerStatus
from nodes.servers import serving
from tests.conftest import wait_until
from tests.nodes.test_laptops_api import api, events

PORT = 50071


def running(nodes) -> dict[str, int]:
    servers = RpcServer.objects.filter(node__in=nodes, port=PORT, status=ServerStatus.RUNNING, pid__isnull=False)
    return {server.node.name: server.pid for server in servers.select_related("node")}


def test_it_restarts_each_laptops_servers_and_waits_until_they_run(nodes, supervisor, celery_worker, web_server,
                                                                   alice):
    serving_ones, idle = nodes[:2], nodes[2]
    for node in serving_ones:
        serving.want(node, PORT, "start")
    before = wait_until(lambda: len(running(serving_ones)) == 2 and running(serving_ones), 90, "both servers running")
    admin = api(web_server, alice)
    started = admin.post(f"{admin.base}/nodes/actions/", json={"action": "restart_rpc",
                                                               "nodes": [node.name for node in nodes]})
    assert started.status_code == 202, started.text
    last = events(admin, f"{web_server}{started.json()['events']}")[-1]

    assert last["counts"]["succeeded"] == 3, last
    names = [node.name for node in serving_ones]
    assert last["summary"] == f"Rpc-servers restarted on 2; 1 had none to restart: {idle.name}.", last
    each = {action["node"]: action for action in last["actions"]}
    assert all(each[name]["message"] == f"Restarted port {PORT}." for name in names)
    after = running(serving_ones)
    assert set(after) == set(names) and all(after[name] != before[name] for name in names), (before, after)
    assert not RpcServer.objects.filter(restart_requested=True).exists()
    RpcServer.objects.update(wanted=False)
    wait_until(lambda: not RpcServer.objects.exclude(status=ServerStatus.STOPPED).exists(), 60, "servers stopped")
