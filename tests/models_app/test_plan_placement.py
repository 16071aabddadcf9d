"""llama.cpp places the bundled model's layers exactly where the plan says, across real rpc-servers."""

import pytest

from models_app.gguf.meta import read_metadata
from models_app.library.bundled import bundled_model_path
from models_app.llamacpp import oneshot
from models_app.planning.planner import Machine, MiB, Options, device_names, plan_mode, shape_of
from nodes.probing import probe
from nodes.remote import ssh
from nodes.runtime import install
from nodes.servers import rpcserver
from tests.conftest import wait_for_port
from tests.nodes.laptops import target

PORT = 50301
PROMPT = "<|im_start|>user\nWhat is a laptop?<|im_end|>\n<|im_start|>assistant\n"


@pytest.fixture(scope="module")
def servers(lan, runtime_bundle):
    """One rpc-server per simulated laptop, open on the LAN (direct mode keeps this test short)."""
    the_lan = lan(3)
    endpoints = []
    for laptop in the_lan.laptops:
        node = target(the_lan, laptop)
        install.install_runtime(node, "~/.cp-plan", runtime_bundle, probe.probe(node, "~/.cp-plan"),
                                lambda *a, **k: None)
        rpcserver.start(node, "~/.cp-plan", PORT, bind=laptop.address)
        wait_for_port(PORT, host=laptop.address)
        endpoints.append(f"{laptop.address}:{PORT}")
    yield endpoints
    for laptop in the_lan.laptops:
        node = target(the_lan, laptop)
        rpcserver.stop(node, "~/.cp-plan", PORT)
        ssh.sh(node, "rm -rf .cp-plan")


@pytest.mark.parametrize("mode, head, sizes, speeds", [
    ("fastest", (100, 10), (20, 200, 20), (20, 8, 4)),  # a fast laptop, and another for the output layer
    ("fastest", (150, 30), (60, 60, 60), (5, 6, 7)),  # the head keeps every block, a laptop the output
    ("memory", (80, 10), (300, 60, 20), (5, 5, 5)),  # uneven, memory-proportional, over three laptops
    ("even", (80, 10), (40, 40, 40), (5, 5, 5)),
])
def test_it_places_layers_exactly_as_planned(servers, mode, head, sizes, speeds):
    shape = shape_of(read_metadata(bundled_model_path()))
    head = Machine("head", head[0] * MiB, head[1])
    pairs = enumerate(zip(sizes, speeds, strict=True))
    laptops = [Machine(f"l{i}", (size + 160) * MiB, speed, 0.0005) for i, (size, speed) in pairs]
    options = Options(ctx=512, n_ubatch=512)
    plan = plan_mode(mode, shape, head, laptops, options)
    assert plan is not None and len(plan.stages) > 1
    used = [servers[int(stage.machine.name[1:])] for stage in plan.stages[1:]]
    answer = oneshot.complete(used, PROMPT, max_tokens=4, n_gpu_layers=plan.n_gpu_layers,
                              tensor_split=plan.tensor_split)
    assert [answer["placement"][i] for i in range(shape.n_layer + 1)] == device_names(plan)
    assert answer["completion_tokens"] > 0
