"""llama.cpp's own server as the benchmarks' anchor: built from the same vendored llama.cpp as the panel
(scripts/build_llama.py --llama-server), run with --rpc against rpc-servers of its own on a deployment's
laptops, each reached through an SSH tunnel as the panel reaches its own, with the deployment's plan
(-ngl, --tensor-split), -np slots and a context of ctx tokens per slot; continuous batching on (its default)."""

import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

from harness import ROOT, end, free_port

RPC_PORT = 50311  # beside the deployments' own rpc-servers (50052 and up)
LOADED_WITHIN_S = 600


def binary() -> Path:
    sys.path.insert(0, str(ROOT / "scripts"))
    import build_llama

    return build_llama.llama_server()


def server_argv(deployment, endpoints: list[str], slots: int, port: int) -> list[str]:
    """The engine's settings where llama-server has its own defaults: llama-cpp-python's thread counts (half
    the cores generating, all for prompts), no flash attention, batches of 512, one KV stream per slot
    (the panel's design: kv_unified false), no prompt cache in RAM beyond the slots' own."""
    plan, cores = deployment.plan, os.cpu_count() or 2
    return [str(binary()), "-m", deployment.model.path, "--rpc", ",".join(endpoints),
            "-ngl", str(plan["n_gpu_layers"]), "--tensor-split", ",".join(str(x) for x in plan["tensor_split"]),
            "-np", str(slots), "-c", str(deployment.ctx * slots), "--no-kv-unified", "-fa", "off",
            "-b", "512", "-ub", "512", "-t", str(max(cores // 2, 1)), "-tb", str(cores), "--cache-ram", "0",
            "--no-webui", "--host", "127.0.0.1", "--port", str(port)]


def tunnelled_servers(deployment, started: list) -> list[str]:
    """An rpc-server of its own on each of the deployment's laptops (bound to the laptop's loopback, as the
    panel's are), each behind an SSH forward (added to `started` as they start); the local endpoints in
    pipeline order."""
    from nodes.remote import ssh
    from nodes.servers import rpcserver

    endpoints = []
    for stage in deployment.stages.select_related("node").order_by("position"):
        target = stage.node.ssh_target()
        rpcserver.start(target, stage.node.install_dir, RPC_PORT, bind="127.0.0.1")
        forward = ssh.forward(target, RPC_PORT, free_port())
        started.append((stage.node, forward))
        endpoints.append(f"127.0.0.1:{forward.local_port}")
    time.sleep(1)
    return endpoints


def stop_servers(started: list) -> None:
    from nodes.servers import rpcserver

    for node, forward in started:
        forward.close()
        rpcserver.stop(node.ssh_target(), node.install_dir, RPC_PORT)


def wait_loaded(process: subprocess.Popen, port: int, log: Path) -> None:
    deadline = time.monotonic() + LOADED_WITHIN_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"llama-server exited ({process.returncode}):\n{tail(log)}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise SystemExit(f"llama-server did not load within {LOADED_WITHIN_S} s:\n{tail(log)}")


def tail(log: Path, lines: int = 20) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


def check_placement(deployment, log: Path) -> None:
    """The layers must sit where the panel's engine has them, or the comparison is of two other pipelines."""
    from models_app.deploying.deploy import expected_devices
    from models_app.llamacpp.oneshot import LAYER_PLACED

    expected = expected_devices(deployment.plan)
    placed = {}
    for layer, device in LAYER_PLACED.findall(log.read_text(errors="replace")):
        placed.setdefault(int(layer), device)  # the model's own first: a draft model (--model-draft) loads after
    found = [placed.get(i) for i in range(len(expected))]
    if found != expected:
        raise SystemExit(f"llama-server placed the layers as {found}, not as the panel's plan {expected}.")


def start(argv: list[str], port: int, log: Path) -> subprocess.Popen:
    with open(log, "wb") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        wait_loaded(process, port, log)
    except BaseException:
        end(process)
        raise
    return process


@contextmanager
def llama_server(deployment, slots: int, extra: tuple[str, ...] = ()):
    """The port of a loaded llama-server for `deployment`'s model and plan (and `extra` arguments, such as
    --jinja); everything it needs ends after.
    A first load at debug verbosity checks where the layers went; the measured server logs only at its
    default level (debug logs some 25 lines a token)."""
    log = Path(tempfile.mkstemp(prefix="llama-server-", suffix=".log")[1])
    port, process, started = free_port(), None, []
    try:
        endpoints = tunnelled_servers(deployment, started)
        end(start([*server_argv(deployment, endpoints, slots, port), *extra, "--verbosity", "5"], port, log))
        check_placement(deployment, log)
        process = start([*server_argv(deployment, endpoints, slots, port), *extra], port, log)
        yield port
    finally:
        if process is not None:
            end(process)
        stop_servers(started)
        log.unlink(missing_ok=True)
