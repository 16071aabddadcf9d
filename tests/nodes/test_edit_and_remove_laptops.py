"""A lab admin edits a laptop (memory the planner may use, its place in the pipeline, where it is) and removes
it: refused while a deployment holds it; a new address must show the pinned host key; removal stops its
rpc-servers on the laptop and, if asked, deletes what the panel put there and nothing else."""

import socket

import pytest
from django.test import Client

from models_app.models import Deployment, DeploymentStage, DeploymentStatus
from nodes.models import ActionKind, ActionStatus, Node, NodeAction, NodeStatus, RpcServer
from nodes.remote import ssh
from nodes.servers import rpcserver
from tests.jobs.standins import ready_deployment
from tests.nodes.laptops import register, run_now, target
from tests.rows import HOST_KEY

GB = 1 << 30


def admin(alice) -> Client:
    client = Client()
    client.force_login(alice)
    return client


def a_laptop(name="lab-1", host="192.0.2.10") -> Node:
    return Node.objects.create(name=name, host=host, username="lab", host_key=HOST_KEY)


def form_of(node: Node, **changes) -> dict:
    values = {"name": node.name, "host": node.host, "port": node.port, "username": node.username,
              "connection": node.connection, "install_dir": node.install_dir, "pipeline_order": node.pipeline_order,
              "usable_gb": "", "reserve_gb": node.memory_reserve / GB}
    return {**values, **changes}


def holding(node: Node, status=DeploymentStatus.READY) -> Deployment:
    deployment = ready_deployment(status=status)
    DeploymentStage.objects.create(deployment=deployment, position=0, node=node, first_layer=0, layer_count=1,
                                   memory={})
    return deployment


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # nothing listens there once closed


def test_memory_order_and_name_change_without_reaching_the_laptop(alice):
    node = a_laptop()
    response = admin(alice).post(f"/nodes/{node.name}/edit/", form_of(
        node, name="lab-one", usable_gb="6.5", reserve_gb="2", pipeline_order="3"))
    assert response.status_code == 302 and response["Location"] == "/nodes/lab-one/"
    node.refresh_from_db()
    assert (node.name, node.usable_memory, node.memory_reserve, node.pipeline_order) == (
        "lab-one", int(6.5 * GB), 2 * GB, 3)
    assert node.usable_bytes() == int(6.5 * GB)
    assert not NodeAction.objects.filter(node=node).exists(), "nothing about reaching it changed"
    admin(alice).post(f"/nodes/{node.name}/edit/", form_of(node, usable_gb=""))
    node.refresh_from_db()
    assert node.usable_memory is None, "empty goes back to the measured memory"


@pytest.mark.parametrize("changes, said", [
    ({"usable_gb": "0"}, "greater than or equal to 0.25"),
    ({"reserve_gb": "-1"}, "greater than or equal to 0"),
    ({"host": "-oProxyCommand=touch /tmp/x"}, ""),
    ({"install_dir": "~/../etc"}, "without &#x27;..&#x27;"),
    ({"port": "70000"}, "less than or equal to 65535"),
    ({"name": "add"}, ""),
])
def test_bad_values_are_refused_in_words_and_nothing_is_saved(alice, changes, said):
    node = a_laptop()
    response = admin(alice).post(f"/nodes/{node.name}/edit/", form_of(node, **changes))
    assert response.status_code == 400 and said in response.content.decode()
    assert Node.objects.get(pk=node.pk).host == node.host and Node.objects.get(pk=node.pk).name == "lab-1"


def test_reaching_it_cannot_change_while_a_deployment_holds_it_but_its_memory_can(alice):
    node = a_laptop()
    deployment = holding(node)
    response = admin(alice).post(f"/nodes/{node.name}/edit/", form_of(node, host="192.0.2.11"))
    assert response.status_code == 400
    assert f"holds layers of standin #{deployment.pk}: stop that deployment before changing its host" in \
        response.content.decode()
    assert Node.objects.get(pk=node.pk).host == "192.0.2.10"
    assert admin(alice).post(f"/nodes/{node.name}/edit/", form_of(node, usable_gb="3")).status_code == 302


def test_an_unreachable_new_address_saves_nothing(alice):
    node = a_laptop()
    response = admin(alice).post(f"/nodes/{node.name}/edit/", form_of(node, host="127.0.0.1", port=closed_port()))
    assert response.status_code == 400 and "Nothing was saved: Cannot reach 127.0.0.1" in response.content.decode()
    assert Node.objects.get(pk=node.pk).host == "192.0.2.10"


def test_removal_is_refused_while_a_deployment_holds_it_and_names_it(alice):
    node = a_laptop()
    deployment = holding(node, DeploymentStatus.LOADING)
    response = admin(alice).post(f"/nodes/{node.name}/remove/")
    assert response.status_code == 409
    assert f"lab-1 holds layers of standin #{deployment.pk} (loading): stop that deployment first." in \
        response.content.decode()
    assert Node.objects.filter(pk=node.pk).exists()


def test_an_unreachable_laptop_is_removed_with_a_warning(alice):
    node = a_laptop(host="127.0.0.1")
    Node.objects.filter(pk=node.pk).update(port=closed_port())
    RpcServer.objects.create(node=node, port=50052, wanted=True)
    stopped = holding(node, DeploymentStatus.STOPPED)
    client = admin(alice)
    page = client.get(f"/nodes/{node.name}/remove/").content.decode()
    assert "rpc-server on port 50052 is stopped on the laptop first" in page
    assert "1 stopped or failed deployment that used it is removed too" in page
    shown = client.post(f"/nodes/{node.name}/remove/", follow=True).content.decode()
    assert "lab-1 removed." in shown and "could not be reached" in shown
    assert not Node.objects.filter(pk=node.pk).exists() and not Deployment.objects.filter(pk=stopped.pk).exists()


def test_a_new_address_with_another_host_key_waits_for_approval(lan, alice, db):
    the_lan = lan(2)
    first, second = the_lan.laptops[:2]
    node = register(the_lan, first, name="moving")
    try:
        response = admin(alice).post("/nodes/moving/edit/", form_of(node, host=second.address), follow=True)
        node.refresh_from_db()
        assert node.host == second.address and node.status == NodeStatus.HOST_KEY_CHANGED
        assert node.host_key == first.host_key and node.presented_host_key == second.host_key
        assert "presents another host key than the one pinned" in response.content.decode()
    finally:
        ssh.forget(node.ssh_target())


def test_removal_stops_its_rpc_server_and_deletes_only_what_the_panel_made(lan, runtime_bundle, alice, db):
    the_lan = lan(3)
    laptop = the_lan.laptops[2]
    node = register(the_lan, laptop, name="leaving")
    own = target(the_lan, laptop)
    try:
        assert run_now(node, ActionKind.INSTALL_RUNTIME).status == ActionStatus.SUCCEEDED
        rpcserver.start(node.ssh_target(), node.install_dir, 50071)
        RpcServer.objects.create(node=node, port=50071, wanted=True)
        assert rpcserver.state(own, node.install_dir, 50071).running
        ssh.sh(own, 'echo mine > "$1/notes.txt"', ssh.remote_path(node.install_dir))  # the laptop user's own file
        page = admin(alice).post("/nodes/leaving/remove/", {"wipe": "1"}, follow=True).content.decode()
        assert "Stopped its rpc-server on port 50071" in page and "runtime and caches were deleted" in page
        assert not Node.objects.filter(name="leaving").exists()
        assert not rpcserver.state(own, node.install_dir, 50071).running
        left = ssh.sh(own, 'ls -A "$1"', ssh.remote_path(node.install_dir)).stdout.split()
        assert left == ["notes.txt"]
    finally:
        ssh.sh(own, 'pkill -u "$(id -un)" -f "ggml-rpc-server.*50071"; rm -rf -- "$1"',
               ssh.remote_path(node.install_dir))
        ssh.forget(own)


def test_an_install_folder_that_is_the_home_is_never_wiped(alice):
    node = a_laptop(host="127.0.0.1")
    Node.objects.filter(pk=node.pk).update(port=closed_port(), install_dir="~")
    shown = admin(alice).post(f"/nodes/{node.name}/remove/", {"wipe": "1"}, follow=True).content.decode()
    assert "lab-1 removed." in shown and "Its files were left: its install folder is the user&#x27;s home" in shown
    assert not Node.objects.filter(pk=node.pk).exists()
