"""GGUF files the tests write themselves, with the `gguf` package."""

import functools
import hashlib
import inspect
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


def write_loadable_model(path: Path, layers: int = 6, embd: int = 768, ffn: int = 7168, seed: int = 0) -> Path:
    """A qwen2 model llama.cpp really loads and runs: random f16 weights, SmolLM2's tokenizer, and feed-forward
    tensors of 10.5 MiB each (over the rpc-server's 10 MiB cache threshold). About 350 MiB with the defaults.
    Written once per shape beside the test drafts and copied from there: drawing its weights took about 4 s of
    CPU a file, and the same arguments always drew the same file."""
    from tests.drafts import cached

    version = hashlib.sha1(inspect.getsource(write_weights).encode()).hexdigest()[:8]
    name = f"loadable-{layers}-{embd}-{ffn}-{seed}-{version}.gguf"
    return cached(path.parent, name, lambda part: write_weights(part, layers, embd, ffn, seed), target=path)


def write_weights(path: Path, layers: int, embd: int, ffn: int, seed: int) -> Path:
    from models_app.library.bundled import bundled_model_path

    heads, kv_heads = embd // 64, max(embd // 192, 1)
    kv = kv_heads * 64
    writer = gguf.GGUFWriter(str(path), "qwen2")
    writer.add_name("test-qwen2")
    writer.add_block_count(layers)
    writer.add_context_length(4096)
    writer.add_embedding_length(embd)
    writer.add_feed_forward_length(ffn)
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    vocab = copy_tokenizer(writer, bundled_model_path())
    rng = np.random.default_rng(seed)

    def weights(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape, dtype=np.float32) * 0.02).astype(np.float16)

    writer.add_tensor("token_embd.weight", weights(vocab, embd))
    for i in range(layers):
        writer.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(embd, dtype=np.float32))
        writer.add_tensor(f"blk.{i}.attn_q.weight", weights(embd, embd))
        writer.add_tensor(f"blk.{i}.attn_q.bias", np.zeros(embd, dtype=np.float32))
        writer.add_tensor(f"blk.{i}.attn_k.weight", weights(kv, embd))
        writer.add_tensor(f"blk.{i}.attn_k.bias", np.zeros(kv, dtype=np.float32))
        writer.add_tensor(f"blk.{i}.attn_v.weight", weights(kv, embd))
        writer.add_tensor(f"blk.{i}.attn_v.bias", np.zeros(kv, dtype=np.float32))
        writer.add_tensor(f"blk.{i}.attn_output.weight", weights(embd, embd))
        writer.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(embd, dtype=np.float32))
        writer.add_tensor(f"blk.{i}.ffn_gate.weight", weights(ffn, embd))
        writer.add_tensor(f"blk.{i}.ffn_up.weight", weights(ffn, embd))
        writer.add_tensor(f"blk.{i}.ffn_down.weight", weights(embd, ffn))
    writer.add_tensor("output_norm.weight", np.ones(embd, dtype=np.float32))
    writer.add_tensor("output.weight", weights(vocab, embd))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def copy_tokenizer(writer: gguf.GGUFWriter, source: Path) -> int:
    """Every tokenizer.* field of `source` into `writer`; the vocabulary size."""
    vocab = 0
    for name, value, kind, sub_type in tokenizer_fields(Path(source)):
        kind = gguf.GGUFValueType(kind)
        if kind == gguf.GGUFValueType.ARRAY:
            writer.add_key_value(name, value, kind, sub_type=gguf.GGUFValueType(sub_type))
            if name == "tokenizer.ggml.tokens":
                vocab = len(value)
        else:
            writer.add_key_value(name, value, kind)
    return vocab


def cache_root() -> Path | None:
    """Where models and parts of them that tests make are kept across runs: beside the llama.cpp builds
    (settings.BUILD_CACHE_DIR). None when it cannot be written: nothing is kept."""
    import os

    from django.conf import settings

    root = Path(settings.BUILD_CACHE_DIR) / "test-models"
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return root if os.access(root, os.W_OK) else None


@functools.cache
def tokenizer_fields(source: Path) -> list[tuple]:
    """Each tokenizer.* field of `source` as (name, value, value type, array item type or None). gguf-py's reader
    takes 3 s of CPU over the bundled model (an object per token): what it read is kept in the build cache under
    the hash of the file's bytes and the gguf package's version, and in this process."""
    import hashlib
    import importlib.metadata
    import json
    import os

    root = cache_root()
    if root:
        with open(source, "rb") as handle:
            digest = hashlib.file_digest(handle, "sha256").hexdigest()[:32]
        kept = root / f"tokenizer-{digest}-gguf-{importlib.metadata.version('gguf')}.json"
        if kept.is_file():
            return [tuple(field) for field in json.loads(kept.read_text())]
    fields = [(name, field.contents(), int(field.types[0]),
               int(field.types[-1]) if field.types[0] == gguf.GGUFValueType.ARRAY else None)
              for name, field in gguf.GGUFReader(str(source)).fields.items() if name.startswith("tokenizer.")]
    if root:
        partial = kept.with_name(f"{kept.name}.{os.getpid()}.part")
        partial.write_text(json.dumps(fields))
        partial.rename(kept)
    return fields
