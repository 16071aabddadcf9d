"""Ternary models the tests and benchmarks make themselves: a small llama-architecture model written in f16 with
the `gguf` package, then quantized by llama.cpp's own quantizer to TQ1_0, TQ2_0 or Q4_0.

The quantizer is `llama_model_quantize` in the head's libllama: the function the `llama-quantize` tool calls after
parsing its arguments, from the same vendored llama.cpp and the same build as the laptops' runtime, so no build
of the tool is needed. TQ1_0 and TQ2_0 pack 256 weights a block (QK_K): a tensor whose rows are not a multiple of
256 falls back to Q4_0, so every width here is one (the bundled SmolLM2's 576 is not)."""

import functools
import subprocess
import sys
from pathlib import Path

import gguf
import numpy as np

from tests.models_app.gguf_files import copy_tokenizer

ROOT = Path(__file__).resolve().parents[2]
FILE_TYPES = {name: gguf.LlamaFileType[f"MOSTLY_{name}"] for name in ("TQ1_0", "TQ2_0", "Q4_0", "Q4_K_M")}


def write_llama_model(path: Path, layers: int = 4, embd: int = 512, ffn: int = 1536, seed: int = 0) -> Path:
    """A llama model llama.cpp loads and runs: random f16 weights, SmolLM2's tokenizer, the output tied to the
    token embedding (as SmolLM2's is), heads of 64."""
    from models_app.bundled import bundled_model_path

    if embd % 256 or ffn % 256:
        raise ValueError(f"widths {embd} and {ffn} must be multiples of 256 for the ternary types")
    heads, kv_heads = embd // 64, max(embd // 256, 1)
    kv = kv_heads * 64
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name(f"test-llama-{layers}x{embd}")
    writer.add_block_count(layers)
    writer.add_context_length(4096)
    writer.add_embedding_length(embd)
    writer.add_feed_forward_length(ffn)
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_rope_dimension_count(64)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    vocab = copy_tokenizer(writer, bundled_model_path())
    rng = np.random.default_rng(seed)

    def weights(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape, dtype=np.float32) * 0.05).astype(np.float16)

    writer.add_tensor("token_embd.weight", weights(vocab, embd))
    for i in range(layers):
        writer.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(embd, dtype=np.float32))
        writer.add_tensor(f"blk.{i}.attn_q.weight", weights(embd, embd))
        writer.add_tensor(f"blk.{i}.attn_k.weight", weights(kv, embd))
        writer.add_tensor(f"blk.{i}.attn_v.weight", weights(kv, embd))
        writer.add_tensor(f"blk.{i}.attn_output.weight", weights(embd, embd))
        writer.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(embd, dtype=np.float32))
        writer.add_tensor(f"blk.{i}.ffn_gate.weight", weights(ffn, embd))
        writer.add_tensor(f"blk.{i}.ffn_up.weight", weights(ffn, embd))
        writer.add_tensor(f"blk.{i}.ffn_down.weight", weights(embd, ffn))
    writer.add_tensor("output_norm.weight", np.ones(embd, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


# Runs in a child: libllama stays out of the test process (as the engine keeps it out of the panel's).
QUANTIZE = """
import json, sys
import llama_cpp
from jobs.engine.llamacpp import load_backends
load_backends()
source, target, ftype = sys.argv[1], sys.argv[2], int(sys.argv[3])
params = llama_cpp.llama_model_quantize_default_params()
params.ftype = ftype
params.nthread = 2
sys.exit(llama_cpp.llama_model_quantize(source.encode(), target.encode(), llama_cpp.ctypes.byref(params)))
"""


def quantize(source: Path, target: Path, file_type: str) -> Path:
    """`source` (f16 or f32) quantized to `file_type` (TQ1_0, TQ2_0, Q4_0, Q4_K_M) at `target`."""
    done = subprocess.run([sys.executable, "-c", QUANTIZE, str(source), str(target),
                           str(FILE_TYPES[file_type].value)], capture_output=True, text=True, cwd=ROOT,
                          timeout=600, check=False)
    if done.returncode != 0 or not target.is_file():
        raise RuntimeError(f"llama.cpp could not quantize {source.name} to {file_type} (exit {done.returncode}): "
                           f"{done.stderr.strip()[-2000:]}")
    return target


@functools.cache
def tensors(path: Path) -> dict:
    """Each tensor by name (its tensor_type, n_elements, n_bytes), read by the `gguf` package's own reader, not by
    the panel's (once per file: it builds an object per token of the tokenizer)."""
    return {tensor.name: tensor for tensor in gguf.GGUFReader(str(path)).tensors}
