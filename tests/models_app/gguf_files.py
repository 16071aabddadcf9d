"""GGUF files the tests write themselves, with the `gguf` package."""

from pathlib import Path

import gguf
import numpy as np


def write_gguf(path: Path, arch: str = "qwen2", layers: int = 4, embd: int = 1024, big: bool = True) -> Path:
    """A small model of another architecture; with `big`, its feed-forward tensors exceed 10 MiB each."""
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_name(f"test-{arch}")
    writer.add_block_count(layers)
    writer.add_context_length(2048)
    writer.add_embedding_length(embd)
    writer.add_head_count(8)
    writer.add_head_count_kv(2)
    writer.add_vocab_size(1000)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    ffn = 2816 if big else 64
    writer.add_tensor("token_embd.weight", np.zeros((1000, embd), dtype=np.float32))
    for i in range(layers):
        writer.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(embd, dtype=np.float32))
        writer.add_tensor(f"blk.{i}.ffn_up.weight", np.zeros((ffn, embd), dtype=np.float32))
    writer.add_tensor("output_norm.weight", np.ones(embd, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
