"""A laptop's GPU through Vulkan against its CPU, and a plan over a GPU laptop and two CPU laptops: memory per device.

Mesa's lavapipe is a real Vulkan driver that computes on the CPU: this measures the Vulkan path's correctness and
cost on this machine, not a GPU's speed (docs/gpus.md; bench/gpu_check.sh is the real-GPU check).

0. The same laptop's server left idle, serving its CPU and serving its Vulkan0: resident memory.
1. One simulated laptop with lavapipe (nodes/simlan.give_vulkan_gpu): the bundled model's every layer on its CPU,
   then on its Vulkan0, alternating, `--rounds` times: tokens/s and, against the head alone, the first token where
   the greedy answers part.
2. Three laptops, the first's Vulkan0 and the others' CPUs, split evenly: the planner's memory per device against
   what llama.cpp says it allocated there (model, KV and compute buffers).

    .venv/bin/python bench/vulkan_device.py [--rounds 3] [--tokens 32]
"""

import argparse
import statistics
import time
from contextlib import contextmanager
from pathlib import Path

from lan import ROOT, target  # noqa: F401  (sets up sys.path and Django's settings)

INSTALL_DIR = "~/.clusterpanel-bench"
CHAT = [{"role": "user", "content": "List the planets of the solar system in order, one per line."}]
PORT = 50480


@contextmanager
def gpu_lan(count: int):
    import django

    django.setup()
    from django.conf import settings

    from nodes.simlan.lan import SimLan

    harness = SimLan("bvk", Path(settings.DATA_DIR) / "simlan", subnet="10.250.0.0/24")
    try:
        harness.up(count)
        harness.give_vulkan_gpu(1)
        yield harness.status()
    finally:
        harness.down()


@contextmanager
def servers(nodes: list, devices: list[list[str]]):
    """One rpc-server per laptop serving `devices[i]`, reached through SSH tunnels; their endpoints."""
    from nodes.remote import ssh
    from nodes.servers import rpcserver
    from nodes.servers.supervisor import free_port

    forwards = []
    try:
        for node, served in zip(nodes, devices, strict=True):
            rpcserver.start(node, INSTALL_DIR, PORT, devices=served)
            forwards.append(ssh.forward(node, PORT, free_port()))
        yield [f"127.0.0.1:{forward.local_port}" for forward in forwards]
    finally:
        for forward in forwards:
            forward.close()
        for node in nodes:
            rpcserver.stop(node, INSTALL_DIR, PORT)


def first_difference(ours: list[str], theirs: list[str]) -> str:
    for position, (a, b) in enumerate(zip(ours, theirs, strict=False)):
        if a != b:
            return f"token {position}: {a!r} vs {b!r}"
    return "identical" if len(ours) == len(theirs) else f"token {min(len(ours), len(theirs))}: one ended"


def device_against_cpu(node, rounds: int, tokens: int) -> None:
    from models_app.library.bundled import bundled_model_path
    from models_app.llamacpp import oneshot

    model = bundled_model_path()
    reference = oneshot.complete([], "", tokens, model=model, n_gpu_layers=0, chat=CHAT)["pieces"]
    rates: dict[str, list[float]] = {"CPU": [], "Vulkan0": []}
    parted: dict[str, str] = {}
    for round_ in range(rounds):
        for device in (["CPU", "Vulkan0"] if round_ % 2 == 0 else ["Vulkan0", "CPU"]):
            with servers([node], [[device]]) as endpoints:
                answer = oneshot.complete(endpoints, "", tokens, model=model, timeout=900, chat=CHAT)
            rates[device].append(answer["completion_tokens"] / answer["seconds"])
            parted[device] = first_difference(answer["pieces"], reference)
    print(f"\n| device of the laptop | tokens/s (median of {rounds}) | against the head alone |")
    print("|---|---:|---|")
    for device, found in rates.items():
        print(f"| {device} | {statistics.median(found):.2f} | {parted[device]} |")
    cpu, vulkan = statistics.median(rates["CPU"]), statistics.median(rates["Vulkan0"])
    print(f"\nVulkan0 (lavapipe) ÷ CPU, same laptop, same core: {vulkan / cpu:.2f}×")


def idle_server_memory(node) -> None:
    """Resident memory of a server started and left idle: serving the CPU, and serving Vulkan0 (the Vulkan backend
    and the driver loaded)."""
    from nodes.remote import ssh
    from nodes.servers import rpcserver

    print("\n| server serving | idle resident memory MiB |")
    print("|---|---:|")
    for device in ("CPU", "Vulkan0"):
        rpcserver.start(node, INSTALL_DIR, PORT, devices=[device])
        try:
            for _ in range(100):  # started once its banner ends with the transport
                if "transport" in ssh.sh(node, 'cat -- "$1/log"', rpcserver.folder(INSTALL_DIR, PORT)).stdout:
                    break
                time.sleep(0.2)
            state = rpcserver.state(node, INSTALL_DIR, PORT)
            rss = ssh.run(node, ["ps", "-o", "rss=", "-p", str(state.pid)]).stdout.strip()
        finally:
            rpcserver.stop(node, INSTALL_DIR, PORT)
        print(f"| {device} | {int(rss) / 1024:.1f} |")


def memory_per_device(nodes: list) -> None:
    from models_app.gguf.meta import read_metadata
    from models_app.library.bundled import bundled_model_path
    from models_app.llamacpp import oneshot
    from models_app.planning import planner

    model = bundled_model_path()
    shape = planner.shape_of(read_metadata(model))
    options = planner.Options(ctx=512, head_may_hold_layers=False)
    laptops = [planner.Machine("bvk-1", 2 << 30, 5.0, device="Vulkan0"), planner.Machine("bvk-2", 2 << 30, 5.0),
               planner.Machine("bvk-3", 2 << 30, 5.0)]
    plan = planner.plan_mode("even", shape, planner.Machine("head", 8 << 30, 5.0), laptops, options)
    with servers(nodes, [[stage.machine.device] for stage in plan.stages[1:]]) as endpoints:
        endpoints = list(endpoints)
        answer = oneshot.complete(endpoints, "", 8, model=model, chat=CHAT, n_gpu_layers=plan.n_gpu_layers,
                                  tensor_split=plan.tensor_split, ctx=512)
    # llama.cpp names a buffer by the server's own device index and its endpoint: RPC0[host:port] on each server
    by_endpoint = {name.partition("[")[2].rstrip("]"): kinds for name, kinds in answer["buffers"].items()}
    allocated = {f"RPC{k}": by_endpoint.get(endpoint, {}) for k, endpoint in enumerate(endpoints)}
    print("\n| device | layers | predicted MiB (weights + KV + compute) | llama.cpp allocated MiB | predicted ÷ "
          "allocated |")
    print("|---|---:|---:|---:|---:|")
    for index, stage in enumerate(plan.stages[1:]):
        memory = stage.memory
        predicted = (memory.weights + memory.kv_cache + memory.compute) / 2**20
        found = sum(allocated.get(f"RPC{index}", {}).values()) / 2**20
        print(f"| {stage.machine.name} {stage.machine.device} | {stage.count} | {predicted:.1f} | {found:.1f} | "
              f"{predicted / found:.3f} |" if found else f"| {stage.machine.name} | {stage.count} | {predicted:.1f} "
              "| — | — |")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--memory-only", action="store_true", help="only part 2")
    args = parser.parse_args()
    with gpu_lan(3) as lan:
        from lan import with_runtime

        nodes = with_runtime(lan, INSTALL_DIR)
        if not args.memory_only:
            idle_server_memory(nodes[0])
            device_against_cpu(nodes[0], args.rounds, args.tokens)
        memory_per_device(nodes)


if __name__ == "__main__":
    main()
