"""A laptop with a GPU the runtime reaches through Vulkan (Mesa's lavapipe: a real Vulkan driver, computing on the
CPU): installing the runtime finds the device, the probe records it, an rpc-server serving it holds the model's
layers and generates, "Measure speed" measures it beside the CPU; a device gone by the time a server starts is
named in words."""

import pytest

from jobs.engine import oneshot
from models_app.bundled import bundled_model_path
from nodes import devices, rpcserver, ssh
from nodes.models import ActionKind, ActionStatus
from nodes.supervisor import free_port
from tests.conftest import wait_until
from tests.nodes.laptops import register, run_now
from tests.services import lan_harness

PROMPT = "<|im_start|>user\nName three colours.<|im_end|>\n<|im_start|>assistant\n"
PORT = 50461


@pytest.fixture(scope="module")
def gpu_lan():
    harness = lan_harness("vulkan", "10.248.0.0/24")
    harness.up(1)
    harness.give_vulkan_gpu(1)
    yield harness.status()
    harness.down()


@pytest.fixture
def gpu_laptop(gpu_lan, db):
    node = register(gpu_lan, gpu_lan.laptops[0])
    action = run_now(node, ActionKind.INSTALL_RUNTIME)
    assert action.status == ActionStatus.SUCCEEDED, action.error
    yield node, action
    ssh.forget(node.ssh_target())


def test_installing_the_runtime_finds_the_vulkan_device_and_the_probe_keeps_it(gpu_laptop):
    node, action = gpu_laptop
    assert "Devices: Vulkan0 (llvmpipe" in action.message, action.message
    facts = node.probes.first().facts
    listed = [devices.Device.from_fact(fact) for fact in facts["devices"]]
    assert [device.name for device in listed] == ["Vulkan0", "CPU"]
    vulkan = listed[0]
    assert vulkan.kind == "vulkan" and vulkan.type == "gpu" and vulkan.total >= 2**30
    assert vulkan.host_memory, "lavapipe's memory is the laptop's RAM: the planner must not count it twice"
    assert facts["runtime_protocol"].count(".") == 2
    probe = run_now(node, ActionKind.PROBE)
    assert probe.status == ActionStatus.SUCCEEDED
    assert [fact["name"] for fact in node.probes.first().facts["devices"]] == ["Vulkan0", "CPU"]


def test_a_server_on_the_vulkan_device_holds_every_layer_and_generates(gpu_laptop):
    node, _ = gpu_laptop
    target = node.ssh_target()
    rpcserver.start(target, node.install_dir, PORT, devices=["Vulkan0"])
    forward = None
    try:
        forward = ssh.forward(target, PORT, free_port())
        answer = oneshot.complete([f"127.0.0.1:{forward.local_port}"], PROMPT, max_tokens=16,
                                  model=bundled_model_path(), timeout=300)
        log = ssh.sh(target, 'head -n 30 -- "$1/log"', rpcserver.folder(node.install_dir, PORT)).stdout
    finally:
        if forward:
            forward.close()
        rpcserver.stop(target, node.install_dir, PORT)
    assert 1 <= answer["completion_tokens"] <= 16 and answer["text"].strip(), answer
    remote = [name for name in answer["buffers"] if name.startswith("RPC0[")]
    assert remote and answer["buffers"][remote[0]]["model"] > 50 * 2**20, answer["buffers"]
    assert "Vulkan0: llvmpipe" in log and "  CPU:" not in log, "the server serves the GPU alone, as it was told"


def test_a_device_gone_before_the_server_starts_is_named(gpu_laptop):
    node, _ = gpu_laptop
    target = node.ssh_target()
    try:
        rpcserver.start(target, node.install_dir, PORT, devices=["Vulkan1"])
        wait_until(lambda: not rpcserver.state(target, node.install_dir, PORT).running, 30, "the server gave up")
        state = rpcserver.state(target, node.install_dir, PORT)
    finally:
        rpcserver.stop(target, node.install_dir, PORT)
    assert not state.running
    said = rpcserver.why_it_ended(state.log_tail)
    assert said == ("its device Vulkan1 is no longer there (the laptop now has: Vulkan0, CPU); "
                    "probe the laptop and plan again"), said


def test_measure_speed_measures_each_device(gpu_laptop):
    node, _ = gpu_laptop
    action = run_now(node, ActionKind.MEASURE_SPEED)
    assert action.status == ActionStatus.SUCCEEDED, action.error
    node.refresh_from_db()
    assert node.speed_gb_s > 0 and node.device_speeds["Vulkan0"] > 0
    assert set(action.progress["devices"]) == {"Vulkan0", "CPU"}
    assert "Vulkan0: " in action.message and "CPU: " in action.message
