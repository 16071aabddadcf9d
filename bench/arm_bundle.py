"""The aarch64 runtime bundle on an ARM laptop under qemu, side by side with the x86-64 bundle on an x86-64 laptop.

Simulated laptops (nodes/simlan/arm.py): an x86-64 one, and one ARM laptop per CPU of `--cpus` that runs aarch64
programs through qemu-user as that CPU: a Raspberry Pi 5's Cortex-A76 by default, QEMU's `max` has SVE2 and int8
matrix multiply. Each gets the bundle of its architecture as the panel installs it, then, per laptop alone
and then both together (layers split evenly), the bundled model is loaded over RPC and answers greedily: load
success and seconds, the CPU variant the server chose, tokens/s, and against the head alone the first token
where the greedy answers part (the check Verify makes).

Tokens/s under emulation is not meaningful: QEMU translates each ARM instruction on this x86-64 machine's CPU,
so the ARM figures say nothing about a real ARM laptop's speed. Printed, and marked so.

    .venv/bin/python bench/arm_bundle.py [--tokens 16] [--cpus cortex-a76,max]
"""

import argparse
import re
import time
from contextlib import contextmanager
from pathlib import Path

from lan import ROOT, target, with_runtime  # noqa: F401  (sets up sys.path and Django's settings)

INSTALL_DIR = "~/.clusterpanel-bench"
CHAT = [{"role": "user", "content": "List the planets of the solar system in order, one per line."}]
PORT = 50490


@contextmanager
def arm_lan(cpus: list[str]):
    """Laptop 1 x86-64, laptops 2.. ARM as `cpus`."""
    import django

    django.setup()
    from django.conf import settings

    from nodes.simlan import arm as simarm
    from nodes.simlan.lan import SimLan

    harness = SimLan("barm", Path(settings.DATA_DIR) / "simlan", subnet="10.246.0.0/24")
    try:
        harness.up(1 + len(cpus))
        for index, cpu in enumerate(cpus, start=2):
            simarm.make_arm(harness, index, cpu)
        yield harness
    finally:
        harness.down()


@contextmanager
def servers(nodes: list):
    """One rpc-server per laptop, reached through SSH tunnels; their endpoints and the CPU backend each loaded."""
    from nodes.remote import ssh
    from nodes.servers import rpcserver
    from nodes.servers.supervisor import free_port

    forwards = []
    try:
        for node in nodes:
            rpcserver.start(node, INSTALL_DIR, PORT)
            forwards.append(ssh.forward(node, PORT, free_port()))
        yield [f"127.0.0.1:{forward.local_port}" for forward in forwards]
    finally:
        for forward in forwards:
            forward.close()
        for node in nodes:
            rpcserver.stop(node, INSTALL_DIR, PORT)


def cpu_variant(node) -> str:
    from nodes.remote import ssh
    from nodes.servers import rpcserver

    log = ssh.sh(node, 'cat -- "$1/log" 2>/dev/null', rpcserver.folder(INSTALL_DIR, PORT)).stdout
    found = re.findall(r"libggml-cpu-([\w.]+)\.so", log)
    return found[-1] if found else "?"


def first_difference(ours: list[str], theirs: list[str]) -> str:
    for position, (a, b) in enumerate(zip(ours, theirs, strict=False)):
        if a != b:
            return f"parts at token {position}: {a!r} vs {b!r}"
    return "identical" if len(ours) == len(theirs) else f"parts at token {min(len(ours), len(theirs))}: one ended"


def run(nodes: list, tokens: int, reference: list[str]) -> dict:
    from models_app.library.bundled import bundled_model_path
    from models_app.llamacpp import oneshot
    from models_app.llamacpp.libllama import LlamaCppError

    with servers(nodes) as endpoints:
        started = time.monotonic()
        try:
            answer = oneshot.complete(endpoints, "", tokens, model=bundled_model_path(), chat=CHAT, timeout=1800,
                                      tensor_split=tuple([1] * len(nodes)))
        except LlamaCppError as exc:
            return {"loaded": f"no: {exc}"[:120], "variants": [cpu_variant(node) for node in nodes]}
        wall = time.monotonic() - started
        variants = [cpu_variant(node) for node in nodes]
    rate = answer["completion_tokens"] / answer["seconds"]
    return {"loaded": "yes", "load_s": wall - answer["seconds"], "rate": rate, "variants": variants,
            "verify": first_difference(answer["pieces"], reference)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=16)
    parser.add_argument("--cpus", default="cortex-a76,max", help="ARM CPUs for QEMU to emulate, comma-separated")
    args = parser.parse_args()
    from models_app.library.bundled import bundled_model_path
    from models_app.llamacpp import oneshot
    from nodes.runtime.bundle import find_bundle

    reference = oneshot.complete([], "", args.tokens, model=bundled_model_path(), n_gpu_layers=0, chat=CHAT)["pieces"]
    cpus = args.cpus.split(",")
    with arm_lan(cpus) as harness:
        started = time.monotonic()
        x86, *arms = with_runtime(harness.status(), INSTALL_DIR)
        installed = time.monotonic() - started
        for arch in ("aarch64", "x86_64"):
            bundle = find_bundle(arch)
            print(f"{arch} bundle: {bundle.tarball.name}, {bundle.manifest['size'] / 2**20:.1f} MiB, glibc ≥ "
                  f"{bundle.manifest['min_glibc']}, GLIBCXX ≥ {bundle.manifest['min_glibcxx']}, CPU variants: "
                  f"{', '.join(bundle.manifest['cpu_variants'])}")
        print(f"{len(cpus) + 1} laptops installed as the panel installs them in {installed:.1f} s")
        print(f"\n{args.tokens} greedy tokens of the bundled model, against the head alone (what Verify checks)\n")
        print("| laptops (layers split evenly) | loaded | load s | CPU variant chosen | tokens/s | against the head "
              "alone |")
        print("|---|---|---:|---|---:|---|")
        cases = [(f"ARM ({cpu}, qemu)", [arm], True) for cpu, arm in zip(cpus, arms, strict=True)]
        cases += [("x86-64", [x86], False), (f"ARM ({cpus[0]}, qemu) + x86-64", [arms[0], x86], True)]
        for name, nodes, emulated in cases:
            found = run(nodes, args.tokens, reference)
            said = " (emulated: not meaningful)" if emulated else ""
            print(f"| {name} | {found['loaded']} | {found.get('load_s', 0):.1f} | {' + '.join(found['variants'])} | "
                  f"{found.get('rate', 0):.2f}{said} | {found.get('verify', '—')} |")


if __name__ == "__main__":
    main()
