"""How fast a laptop computes a model: its effective memory bandwidth, measured with llama.cpp itself.

A temporary rpc-server on the laptop, reached through an SSH tunnel, runs every
layer of the bundled model while the head decodes a few tokens greedily. Each
token reads every weight once, so bytes per token x tokens per second is the
bandwidth the planner needs. It catches what a spec sheet misses: thermal
limits, a busy CPU, a cgroup quota, the CPU variant the runtime picked.

This is the laptop's half (its server, its tunnel); the model's half, which
drives llama.cpp on the head, is the engine's (jobs/engine/speedtest.py), and
reaches here through the `run_bundled` hook when the jobs app starts: a laptop's module
imports nothing that runs models.
"""

from clusterpanel.kit.hooks import Hook
from nodes.remote import ssh
from nodes.servers import rpcserver
from nodes.servers.supervisor import free_port

PORT = 50399


class SpeedError(Exception):
    """The model did not run through the laptop's server; the message says why."""


def nothing_runs_models(endpoint: str, tokens: int) -> tuple[float, int]:
    raise SpeedError("Nothing here runs models: the panel's jobs app is not installed.")


# The bundled model through the server at endpoint ("127.0.0.1:port"), `tokens` of it decoded: (tokens per
# second, bytes each token reads); raises SpeedError.
run_bundled: Hook[[str, int], tuple[float, int]] = Hook("run_bundled", nothing_runs_models)


def measure(target: ssh.SSHTarget, install_dir: str, tokens: int = 32, device: str = "CPU") -> dict:
    """Tokens/s and effective GB/s of one of the laptop's devices (ggml's name: CPU, Vulkan0, …)."""
    rpcserver.start(target, install_dir, PORT, bind="127.0.0.1", devices=[device])
    forward = None
    try:
        forward = ssh.forward(target, PORT, free_port())
        tok_s, per_token = run_bundled(f"127.0.0.1:{forward.local_port}", tokens)
    finally:
        if forward:
            forward.close()
        rpcserver.stop(target, install_dir, PORT)
    return {"tokens_per_s": figure(tok_s), "bandwidth_gb_s": figure(per_token * tok_s / 1e9)}


def figure(value: float) -> float:
    """Three significant digits: a device slower than 5 MB/s (lavapipe on a busy core) is slow, not 0 GB/s,
    which the planner would read as never measured, and a page as nothing."""
    return float(f"{value:.3g}")
