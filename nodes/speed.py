"""How fast a laptop computes a model: its effective memory bandwidth, measured with llama.cpp itself.

A temporary rpc-server on the laptop, reached through an SSH tunnel, runs every
layer of the bundled model while the head decodes a few tokens greedily. Each
token reads every weight once, so bytes per token x tokens per second is the
bandwidth the planner needs. It catches what a spec sheet misses: thermal
limits, a busy CPU, a cgroup quota, the CPU variant the runtime picked.
"""

from jobs.engine import oneshot
from models_app.bundled import bundled_model_path
from models_app.gguf_meta import read_metadata
from models_app.planner import shape_of
from nodes import rpcserver, ssh
from nodes.supervisor import free_port

PORT = 50399
PROMPT = "<|im_start|>user\nCount from one to twenty.<|im_end|>\n<|im_start|>assistant\n"


def measure(target: ssh.SSHTarget, install_dir: str, tokens: int = 32, device: str = "CPU") -> dict:
    """Tokens/s and effective GB/s of one of the laptop's devices (ggml's name: CPU, Vulkan0, …)."""
    shape = shape_of(read_metadata(bundled_model_path()))
    per_token = sum(shape.layer_bytes) + shape.output_bytes  # the tied output reads a copy of the embedding
    rpcserver.start(target, install_dir, PORT, bind="127.0.0.1", devices=[device])
    forward = None
    try:
        forward = ssh.forward(target, PORT, free_port())
        answer = oneshot.complete([f"127.0.0.1:{forward.local_port}"], PROMPT, max_tokens=tokens, timeout=300)
    finally:
        if forward:
            forward.close()
        rpcserver.stop(target, install_dir, PORT)
    tok_s = answer["completion_tokens"] / answer["seconds"]
    return {"tokens_per_s": round(tok_s, 1), "bandwidth_gb_s": round(per_token * tok_s / 1e9, 2)}
