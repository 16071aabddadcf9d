"""A laptop with a GPU the runtime reaches through Vulkan (Mesa's lavapipe: a real Vulkan driver, computing on the
CPU): installing the runtime finds the device, the probe records it, "Measure speed" measures it beside the CPU
on an rpc-server serving it alone, which holds every layer of the model and generates; a device gone by the time
a server starts is named in words.

The laptop is the run's own lavapipe laptop (tests/emulated.py). Lavapipe generates slowly (about 2 s of the
laptop's core a token, and 20 s more for each new server's first tokens), so one server here generates on it:
Measure speed's. The other tests run the Vulkan runtime only to list its devices, or to have it refuse one."""

import pytest

from models_app.llamacpp import oneshot
from nodes.models import ActionKind, ActionStatus
from nodes.probing import devices, speed
from nodes.remote import ssh
from nodes.servers import rpcserver
from tests.conftest import wait_until
from tests.nodes.laptops import register, run_now

PORT = 50461
# Tokens each device generates when measured here: Measure speed's own 32 cost a minute of lavapipe more, and
# what is checked (a speed above 0 for each device, an answer from the GPU's server) needs a few.
MEASURED_TOKENS = 8


@pytest.fixture
def gpu_laptop(lavapipe_lan, db):
    lan = lavapipe_lan.status()
    node = register(lan, lan.laptops[0])
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


def test_measure_speed_measures_each_device_and_the_gpus_server_holds_every_layer_and_generates(gpu_laptop,
                                                                                               monkeypatch):
    """Measure speed runs the bundled model, every layer of it, on one rpc-server per device, the CPU first and the
    GPU last: the GPU's is a server on the Vulkan device alone that holds every layer and generates (merged here
    from test_a_server_on_the_vulkan_device_holds_every_layer_and_generates, which started one more server of its
    own on lavapipe to show it). Its answer is read as llama.cpp gave it, its log as the server wrote it."""
    node, _ = gpu_laptop
    answers, complete, runner = [], oneshot.complete, speed.run_bundled.function

    def kept(*args, **kwargs) -> dict:
        answers.append(complete(*args, **kwargs))
        return answers[-1]

    monkeypatch.setattr(oneshot, "complete", kept)
    monkeypatch.setattr(speed.run_bundled, "function", lambda endpoint, tokens: runner(endpoint, MEASURED_TOKENS))
    action = run_now(node, ActionKind.MEASURE_SPEED)
    assert action.status == ActionStatus.SUCCEEDED, action.error
    assert not action.progress["failed"], action.progress["failed"]  # a device it could not measure, and why
    node.refresh_from_db()
    assert node.speed_gb_s > 0 and node.device_speeds["Vulkan0"] > 0
    assert set(action.progress["devices"]) == {"Vulkan0", "CPU"}
    assert "Vulkan0: " in action.message and "CPU: " in action.message
    # The GPU's server, measured last: its log is the one left in the measuring server's folder.
    log = ssh.sh(node.ssh_target(), 'head -n 30 -- "$1/log"', rpcserver.folder(node.install_dir, speed.PORT)).stdout
    assert len(answers) == 2, answers
    answer = answers[-1]
    assert 1 <= answer["completion_tokens"] <= MEASURED_TOKENS and answer["text"].strip(), answer
    remote = [name for name in answer["buffers"] if name.startswith("RPC0[")]
    assert remote and answer["buffers"][remote[0]]["model"] > 50 * 2**20, answer["buffers"]
    assert "Vulkan0: llvmpipe" in log and "  CPU:" not in log, "the server serves the GPU alone, as it was told"
