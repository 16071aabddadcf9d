"""GGUF files with the tensor names, shapes and types of real 70-80B models and no weights.

The header (metadata and tensor table) is what llama.cpp's converter and Q4_K_M quantizer write for the model;
the data section is a hole: the file is extended with `truncate`, so a 47 GB model takes a few MB of disk.
The panel's GGUF reader, its metadata checks and its planner see the real model; nothing can run it.

The per-tensor types follow `llama_tensor_get_type_impl` in the vendored llama.cpp's src/llama-quant.cpp for
LLAMA_FTYPE_MOSTLY_Q4_K_M, the rules these three models meet:

- 1-D tensors, biases, norms, `ffn_gate_inp` (expert router) and `ssm_conv1d` are not quantized (F32);
- `output.weight` is Q6_K; `token_embd.weight` (embeddings not tied) keeps the default Q4_K;
- attention V (`attn_v`, and the fused `attn_qkv` of linear-attention layers) is Q6_K in the layers
  `use_more_bits` picks (the first and last eighth, and every third between), else Q4_K, bumped to Q5_K
  in models llama.cpp types as 70B (both 80-layer dense models here);
- `ffn_down` (and its expert / shared-expert forms) is Q6_K in those layers, else Q4_K;
- everything else is Q4_K;
- a row length that the type's block does not divide falls back (`tensor_type_fallback`): Q4_K to Q5_0,
  Q5_K to Q5_1, Q6_K to Q8_0. Qwen2.5-72B's feed-forward width 29568 is not a multiple of 256, so its
  ffn_down tensors end up Q5_0 and Q8_0, as in the published files.

The tokenizer is the real number of tokens and merges with placeholder text (the real vocabularies are not
on this machine); that changes the header by a few MB in a 40-50 GB file. llama.cpp itself loads these files
with `no_alloc` (metadata only, allocations simulated), which is how bench/seed_scenarios.py --llama asks it
what it would allocate.

    .venv/bin/python bench/sparse_gguf.py qwen2.5-72b /tmp/qwen.gguf   # or llama-3-70b, qwen3-next-80b
"""

import argparse
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from math import prod
from pathlib import Path

import gguf
import numpy as np

T = gguf.GGMLQuantizationType
FALLBACK = {T.Q4_K: T.Q5_0, T.Q5_K: T.Q5_1, T.Q6_K: T.Q8_0}
UNQUANTIZED = ("_norm.weight", "ffn_gate_inp", "ssm_conv1d")

Tensor = tuple[str, tuple[int, ...]]  # name, shape in ggml order (row length first)


@dataclass(frozen=True)
class ModelSpec:
    key: str
    title: str
    arch: str
    n_layer: int
    n_embd: int
    n_ff: int
    n_head: int
    n_head_kv: int
    vocab: int
    context: int
    layer_tensors: Callable[["ModelSpec", int], list[Tensor]]
    type_70b: bool  # llama.cpp's LLM_TYPE_70B: its attn_v gets Q5_K instead of Q4_K
    published_bytes: int  # the Q4_K_M file's size as the model hubs list it
    published_source: str
    tokenizer: tuple[str, int, int, int]  # pre-tokenizer, BPE merges (their real count), bos and eos ids
    metadata: dict = field(default_factory=dict)  # further {arch}.* keys, as the converter writes them

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head


def dense_layer(spec: ModelSpec, il: int, biases: bool) -> list[Tensor]:
    """A llama / qwen2 block: attention with grouped KV heads, a gated feed-forward."""
    e, kv, ff = spec.n_embd, spec.head_dim * spec.n_head_kv, spec.n_ff
    b = f"blk.{il}."
    tensors = [(b + "attn_norm.weight", (e,)), (b + "attn_q.weight", (e, e)), (b + "attn_k.weight", (e, kv)),
               (b + "attn_v.weight", (e, kv)), (b + "attn_output.weight", (e, e)), (b + "ffn_norm.weight", (e,)),
               (b + "ffn_gate.weight", (e, ff)), (b + "ffn_up.weight", (e, ff)), (b + "ffn_down.weight", (ff, e))]
    if biases:
        tensors += [(b + "attn_q.bias", (e,)), (b + "attn_k.bias", (kv,)), (b + "attn_v.bias", (kv,))]
    return tensors


def qwen3next_layer(spec: ModelSpec, il: int) -> list[Tensor]:
    """A Qwen3-Next block (src/models/qwen3next.cpp): every fourth layer full attention (gated, with a
    256-wide head), the rest Gated DeltaNet linear attention; then 512 experts and one shared expert."""
    e, m = spec.n_embd, spec.metadata
    head_k, n_k, n_v = m["ssm.state_size"], m["ssm.group_count"], m["ssm.time_step_rank"]
    key_dim, value_dim = head_k * n_k, head_k * n_v
    experts, ff_exp, ff_sh = m["expert_count"], m["expert_feed_forward_length"], \
        m["expert_shared_feed_forward_length"]
    b = f"blk.{il}."
    tensors = [(b + "attn_norm.weight", (e,)), (b + "post_attention_norm.weight", (e,))]
    if (il + 1) % m["full_attention_interval"] == 0:
        head, kv = m["attention.key_length"], m["attention.key_length"] * spec.n_head_kv
        tensors += [(b + "attn_q.weight", (e, head * spec.n_head * 2)), (b + "attn_k.weight", (e, kv)),
                    (b + "attn_v.weight", (e, kv)), (b + "attn_output.weight", (head * spec.n_head, e)),
                    (b + "attn_q_norm.weight", (head,)), (b + "attn_k_norm.weight", (head,))]
    else:
        tensors += [(b + "attn_qkv.weight", (e, key_dim * 2 + value_dim)), (b + "attn_gate.weight", (e, value_dim)),
                    (b + "ssm_conv1d.weight", (m["ssm.conv_kernel"], key_dim * 2 + value_dim)),
                    (b + "ssm_dt.bias", (n_v,)), (b + "ssm_a", (n_v,)), (b + "ssm_ba.weight", (e, n_v * 2)),
                    (b + "ssm_norm.weight", (head_k,)), (b + "ssm_out.weight", (value_dim, e))]
    return tensors + [
        (b + "ffn_gate_inp.weight", (e, experts)), (b + "ffn_gate_exps.weight", (e, ff_exp, experts)),
        (b + "ffn_up_exps.weight", (e, ff_exp, experts)), (b + "ffn_down_exps.weight", (ff_exp, e, experts)),
        (b + "ffn_gate_inp_shexp.weight", (e,)), (b + "ffn_gate_shexp.weight", (e, ff_sh)),
        (b + "ffn_up_shexp.weight", (e, ff_sh)), (b + "ffn_down_shexp.weight", (ff_sh, e))]


MODELS = {spec.key: spec for spec in (
    ModelSpec("qwen2.5-72b", "Qwen2.5-72B-Instruct", "qwen2", n_layer=80, n_embd=8192, n_ff=29568, n_head=64,
              n_head_kv=8, vocab=152064, context=32768, type_70b=True,
              layer_tensors=lambda spec, il: dense_layer(spec, il, biases=True),
              tokenizer=("qwen2", 151387, 151643, 151645),
              published_bytes=47_400_000_000, published_source="Qwen2-72B-Instruct.Q4_K_M.gguf, 47.4 GB "
              "(mradermacher, bartowski; Qwen2.5-72B has the same shapes)",
              metadata={"rope.freq_base": 1e6, "attention.layer_norm_rms_epsilon": 1e-6}),
    ModelSpec("llama-3-70b", "Meta-Llama-3-70B-Instruct", "llama", n_layer=80, n_embd=8192, n_ff=28672,
              n_head=64, n_head_kv=8, vocab=128256, context=8192, type_70b=True,
              layer_tensors=lambda spec, il: dense_layer(spec, il, biases=False),
              tokenizer=("llama-bpe", 280147, 128000, 128009),
              published_bytes=42_500_000_000, published_source="Meta-Llama-3-70B-Instruct-Q4_K_M.gguf, 42.5 GB "
              "(bartowski, mradermacher, mmnga)",
              metadata={"rope.freq_base": 500000.0, "attention.layer_norm_rms_epsilon": 1e-5,
                        "rope.dimension_count": 128, "vocab_size": 128256}),
    ModelSpec("qwen3-next-80b", "Qwen3-Next-80B-A3B-Instruct", "qwen3next", n_layer=48, n_embd=2048, n_ff=5120,
              n_head=16, n_head_kv=2, vocab=151936, context=262144, type_70b=False,
              layer_tensors=qwen3next_layer, published_bytes=48_500_000_000,
              tokenizer=("qwen2", 151387, 151643, 151645),
              published_source="Qwen3-Coder-Next Q4_K_M (same architecture and shapes), 48.5e9 bytes (steampunque)",
              metadata={"rope.freq_base": 1e7, "attention.layer_norm_rms_epsilon": 1e-6,
                        "attention.key_length": 256, "attention.value_length": 256, "rope.dimension_count": 64,
                        "expert_count": 512, "expert_used_count": 10, "expert_feed_forward_length": 512,
                        "expert_shared_feed_forward_length": 512, "full_attention_interval": 4,
                        "ssm.conv_kernel": 4, "ssm.state_size": 128, "ssm.group_count": 16,
                        "ssm.time_step_rank": 32, "ssm.inner_size": 4096}),
)}


def tensors_of(spec: ModelSpec) -> Iterator[Tensor]:
    """In the order llama.cpp's converter writes them (the quantizer's attn_v counter follows this order)."""
    yield "token_embd.weight", (spec.n_embd, spec.vocab)
    for il in range(spec.n_layer):
        yield from spec.layer_tensors(spec, il)
    yield "output_norm.weight", (spec.n_embd,)
    yield "output.weight", (spec.n_embd, spec.vocab)


def use_more_bits(i_layer: int, n_layer: int) -> bool:
    return i_layer < n_layer // 8 or i_layer >= 7 * n_layer // 8 or (i_layer - n_layer // 8) % 3 == 2


def q4_k_m_type(spec: ModelSpec, name: str, shape: tuple[int, ...]) -> T:
    """The type llama-quantize gives this tensor for Q4_K_M. In these models each layer has exactly one
    attn_v or attn_qkv, so the quantizer's running counter of them equals the layer index."""
    if len(shape) < 2 or not name.endswith("weight") or any(part in name for part in UNQUANTIZED):
        return T.F32
    layer = int(name.split(".")[1]) if name.startswith("blk.") else -1
    chosen = T.Q4_K
    if name == "output.weight":
        chosen = T.Q6_K
    elif name.endswith(("attn_v.weight", "attn_qkv.weight")):
        chosen = T.Q6_K if use_more_bits(layer, spec.n_layer) else T.Q5_K if spec.type_70b else T.Q4_K
    elif "ffn_down" in name and use_more_bits(layer, spec.n_layer):
        chosen = T.Q6_K
    block = gguf.GGML_QUANT_SIZES[chosen][0]
    return FALLBACK[chosen] if shape[0] % block else chosen


def tensor_bytes(shape: tuple[int, ...], kind: T) -> int:
    block, type_size = gguf.GGML_QUANT_SIZES[kind]
    return prod(shape) // block * type_size


def pad(value: int, to: int) -> int:
    return (value + to - 1) // to * to


@dataclass(frozen=True)
class Written:
    path: Path
    data_offset: int
    file_size: int
    tensors: list[tuple[str, tuple[int, ...], T, int]]  # name, shape, type, bytes

    @property
    def disk_bytes(self) -> int:
        return self.path.stat().st_blocks * 512

    def count_of(self, kind: T) -> int:
        return sum(1 for tensor in self.tensors if tensor[2] == kind)


def add_metadata(writer: gguf.GGUFWriter, spec: ModelSpec) -> None:
    writer.add_name(spec.title)
    writer.add_quantization_version(gguf.GGML_QUANT_VERSION)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q4_K_M)
    writer.add_block_count(spec.n_layer)
    writer.add_context_length(spec.context)
    writer.add_embedding_length(spec.n_embd)
    writer.add_feed_forward_length(spec.n_ff)
    writer.add_head_count(spec.n_head)
    writer.add_head_count_kv(spec.n_head_kv)
    for key, value in spec.metadata.items():
        add = writer.add_float32 if isinstance(value, float) else writer.add_uint32
        add(f"{spec.arch}.{key}", value)
    pre, merges, bos, eos = spec.tokenizer
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre(pre)
    writer.add_token_list([f"<t{i}>" for i in range(spec.vocab)])
    writer.add_token_types([gguf.TokenType.NORMAL] * spec.vocab)
    writer.add_token_merges([f"<t{i}> <t{i + 1}>" for i in range(merges)])  # llama.cpp's BPE needs merges
    writer.add_bos_token_id(bos)
    writer.add_eos_token_id(eos)


def write_sparse(spec: ModelSpec, path: Path) -> Written:
    """The model's GGUF file at `path`: a real header, then a hole as long as its tensors' data."""
    path = Path(path)
    writer = gguf.GGUFWriter(str(path), spec.arch)
    add_metadata(writer, spec)
    listed = []
    for name, shape in tensors_of(spec):
        kind = q4_k_m_type(spec, name, shape)
        n_bytes = tensor_bytes(shape, kind)
        writer.add_tensor_info(name, tuple(reversed(shape)), np.dtype(np.float32), n_bytes, raw_dtype=kind)
        listed.append((name, shape, kind, n_bytes))
    try:
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_ti_data_to_file()
        handle = writer.fout[0]
        data_offset = pad(handle.tell(), writer.data_alignment)
        file_size = data_offset + sum(pad(n, writer.data_alignment) for *_, n in listed)
        handle.truncate(file_size)  # the hole: no block is written for the weights
    except BaseException:
        writer.close()
        path.unlink(missing_ok=True)  # no half-written model left behind
        raise
    writer.close()
    return Written(path, data_offset, file_size, listed)


def describe(written: Written, spec: ModelSpec) -> str:
    kinds = sorted({t[2] for t in written.tensors}, key=lambda k: k.name)
    mix = ", ".join(f"{k.name} {written.count_of(k)}" for k in kinds)
    return (f"{spec.title} Q4_K_M: {len(written.tensors)} tensors ({mix}); {written.file_size / 1e9:.2f} GB "
            f"({written.file_size / 2**30:.2f} GiB) against {spec.published_bytes / 1e9:.1f} GB published "
            f"({written.file_size / spec.published_bytes - 1:+.2%}); {written.disk_bytes / 2**20:.1f} MiB on disk")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", choices=sorted(MODELS))
    parser.add_argument("path", type=Path)
    args = parser.parse_args(argv)
    if args.path.exists():
        parser.error(f"{args.path} already exists; choose a new path so no file is overwritten.")
    spec = MODELS[args.model]
    try:
        written = write_sparse(spec, args.path)
    except OSError as exc:
        parser.error(f"could not write {args.path}: {exc.strerror or exc}.")
    print(describe(written, spec))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
