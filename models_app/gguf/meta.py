"""What a GGUF file holds, and whether llama.cpp could load it.

A path in, a `ModelMetadata` out, or `GGUFError` in one plain sentence. The header is read by llama.cpp's
own bounded reader (models_app/gguf/reader.py, in a child process held to a memory and time limit); what it
claims is then checked against what the file really holds: the layers against the tensors present, the
sizes against the file, every number against a sane range. The per-layer byte counts feed the planner.
"""

import re
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from math import prod
from pathlib import Path

import gguf

from models_app.gguf.reader import GGUFError, Header, read_header

__all__ = ["GGUFError", "ModelMetadata", "bytes_by_kind", "check_header", "pooling_said", "read_metadata"]

KNOWN_ARCHITECTURES = set(gguf.MODEL_ARCH_NAMES.values())
LAYER_TENSOR = re.compile(r"^blk\.([0-9]+)\.")
READABLE_VERSIONS = (2, 3)  # what llama.cpp's reader accepts; it reads little-endian files only
MAX_LAYERS = 512  # LLAMA_MAX_LAYERS (src/llama-hparams.h): llama.cpp loads no model with more
# Generous bounds, all within the database's 32-bit columns: the largest models today have a 10M context,
# 16k-wide embeddings, a few hundred heads and vocabularies of 262k.
LIMITS = {
    "context_length": 1 << 27,
    "embedding_length": 1 << 20,
    "feed_forward_length": 1 << 22,
    "attention.head_count": 1 << 14,
    "attention.head_count_kv": 1 << 14,
    "vocab_size": 1 << 24,
    "pooling_type": 8,  # llama.h's llama_pooling_type: a model made for embeddings says how to pool
}
KEYS = ["general.architecture", "general.name", "general.file_type", "tokenizer.ggml.tokens",
        "{arch}.block_count", *(f"{{arch}}.{key}" for key in LIMITS)]
POOLING_NONE, POOLING_RANK = 0, 4  # llama.h's enum llama_pooling_type
POOLED = {1: "the mean of its states (the model's own pooling)", 2: "its first token's state (the model's own CLS "
          "pooling)", 3: "its last token's state (the model's own pooling)"}
INTEGER_TYPES = {"uint8", "int8", "uint16", "int16", "uint32", "int32", "uint64", "int64"}


@dataclass(frozen=True)
class ModelMetadata:
    architecture: str
    name: str
    n_layer: int
    n_embd: int
    n_head: int
    n_head_kv: int
    context_length: int
    vocab_size: int
    file_type: str
    file_size: int
    n_ff: int = 0
    pooling: int = 0  # 0: none (a chat model: the panel pools its states by their mean for /v1/embeddings)
    layer_bytes: list[int] = field(default_factory=list)
    other_tensors: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return asdict(self)


# What a file picked by mistake often is, by its first bytes.
KNOWN_STARTS = {b"\x89PNG": "a PNG image", b"\xff\xd8\xff": "a JPEG image", b"PK\x03\x04": "a zip archive",
                b"\x1f\x8b": "a gzip-compressed file (unpack it first)",
                b"(\xb5/\xfd": "a zstd-compressed file (unpack it first)",
                b"version https://git-lfs": "a Git LFS pointer, not the model itself (run `git lfs pull`)",
                b"<": "a web page (a download link saved instead of the file?)", b"{": "a JSON file"}


def pooling_said(pooling: int) -> str:
    """How the panel makes this model's vectors (jobs/engine/embedding.py), in words for its page."""
    if pooling == POOLING_NONE:
        return "the mean of its last layer's states over the input (the model has no pooling of its own)"
    if pooling == POOLING_RANK:
        return "not made: this model ranks documents (a reranker)"
    return POOLED.get(pooling, f"made by llama.cpp's pooling {pooling}")


def looks_like(head: bytes) -> str:
    for start, kind in KNOWN_STARTS.items():
        if head.startswith(start[:len(head)]) and len(head) >= min(len(start), 4):
            return f"is {kind}"
    if not head:
        return "is empty"
    return f"begins with the bytes {head[:4].hex(' ')}"


def check_header(head: bytes, label: str) -> None:
    """The first 8 bytes of a file: GGUF's magic and a version llama.cpp reads, so an upload that is not a
    model is refused after its first chunk."""
    if head[:4] != b"GGUF":
        raise GGUFError(f"{label} is not a GGUF file: a model file begins with the letters GGUF, and this one "
                        f"{looks_like(head)}.")
    if len(head) < 8:
        raise GGUFError(f"{label} is damaged or truncated: it ends inside its header.")
    if int.from_bytes(head[4:8], "big") in READABLE_VERSIONS:
        raise GGUFError(f"{label} is a big-endian GGUF file; llama.cpp on this machine reads little-endian ones.")
    version = int.from_bytes(head[4:8], "little")
    if version not in READABLE_VERSIONS:
        raise GGUFError(f"{label} is damaged or truncated: it says GGUF version {version}, and the panel reads "
                        f"versions {', '.join(map(str, READABLE_VERSIONS))}.")


def read_metadata(path: Path, label: str = "") -> ModelMetadata:
    """`label` names the file in errors when its path means nothing to the reader (an upload's part file)."""
    path = Path(path)
    label = label or path.name
    if not path.is_file():
        raise GGUFError(f"There is no file at {path}.")
    with open(path, "rb") as handle:
        check_header(handle.read(8), label)
    size = path.stat().st_size
    header = read_header(path, label, KEYS)
    arch = architecture(header, label)
    n_layer = block_count(header, arch, label)
    layers, others = tensor_bytes(header, n_layer, size, label)
    numbers = {key: number(header, f"{arch}.{key}", limit, label) for key, limit in LIMITS.items()}
    n_head = first(numbers["attention.head_count"]) or 0
    head_kv = first(numbers["attention.head_count_kv"])
    tokens = header.values.get("tokenizer.ggml.tokens")
    vocab = first(numbers["vocab_size"])
    return ModelMetadata(
        architecture=arch, name=title(header, path), n_layer=n_layer,
        n_embd=first(numbers["embedding_length"]) or 0, n_head=n_head,
        n_head_kv=n_head if head_kv is None else head_kv, n_ff=max(numbers["feed_forward_length"] or [0]),
        context_length=first(numbers["context_length"]) or 0,
        vocab_size=vocab if vocab is not None else tokens["n"] if isinstance(tokens, dict) else 0,
        file_type=file_type(header), file_size=size, layer_bytes=layers, other_tensors=others,
        pooling=first(numbers["pooling_type"]) or 0,
    )


def architecture(header: Header, label: str) -> str:
    arch = header.values.get("general.architecture")
    if arch not in KNOWN_ARCHITECTURES:
        raise GGUFError(f"{label} is for the architecture {shown(arch)}, which llama.cpp does not know.")
    return arch


def block_count(header: Header, arch: str, label: str) -> int:
    key = f"{arch}.block_count"
    if key not in header.values:
        raise GGUFError(f"{label} does not say how many layers it has ({key}).")
    found = header.values[key]
    if not is_integer(found):
        raise GGUFError(f"{label} gives its number of layers ({key}) as {shown(found)}, not as a whole number.")
    if not 1 <= found <= MAX_LAYERS:
        raise GGUFError(f"{label} says it has {found} layers ({key}); llama.cpp loads models of 1 to "
                        f"{MAX_LAYERS} layers.")
    return found


def number(header: Header, key: str, limit: int, label: str) -> list[int] | None:
    """A count the file may give once or per layer (an array): its values, each a whole number in range."""
    if key not in header.values:
        return None
    found = header.values[key]
    if isinstance(found, dict) and found["array"] in INTEGER_TYPES and found["values"] is not None:
        items = found["values"]
    else:
        items = [found]
    if not items or not all(is_integer(item) and 0 <= item <= limit for item in items):
        raise GGUFError(f"{label} gives {key} as {shown(found)}; it must be a whole number from 0 to {limit}.")
    return items


def tensor_bytes(header: Header, n_layer: int, size: int, label: str) -> tuple[list[int], dict[str, int]]:
    """Bytes per layer and of every other tensor, once each tensor is known to fit its shape and the file."""
    layers, others = [0] * n_layer, {}
    seen = set()
    for tensor in header.tensors:
        check_tensor(header, tensor, size, label)
        match = LAYER_TENSOR.match(tensor.name)
        if match is None:
            others[tensor.name] = tensor.n_bytes
            continue
        layer = int(match.group(1))
        if layer >= n_layer:
            raise GGUFError(f"{label} has a tensor {tensor.name} for layer {layer}, but says it has {n_layer} "
                            f"layers (0 to {n_layer - 1}).")
        layers[layer] += tensor.n_bytes
        seen.add(layer)
    missing = sorted(set(range(n_layer)) - seen)
    if missing:
        raise GGUFError(f"{label} says it has {n_layer} layers but holds no tensors for {len(missing)} of them "
                        f"(the first is layer {missing[0]}).")
    return layers, others


def check_tensor(header: Header, tensor, size: int, label: str) -> None:
    type_bytes, block = header.type_traits[tensor.type]
    elements = prod(tensor.shape)
    if block <= 0 or elements % block or elements // block * type_bytes != tensor.n_bytes:
        raise GGUFError(f"{label} gives tensor {tensor.name} the shape {tensor.shape}, which does not match its "
                        f"{tensor.n_bytes} bytes.")
    if header.data_offset + tensor.offset + tensor.n_bytes > size:
        raise GGUFError(f"{label} is damaged or truncated: tensor {tensor.name} ends past the end of the file.")


def is_integer(found) -> bool:
    return isinstance(found, int) and not isinstance(found, bool)


def first(items: list[int] | None) -> int | None:
    return items[0] if items else None


def shown(found) -> str:
    """A value from the file, briefly, for a refusal."""
    if isinstance(found, dict):
        return f"an array of {found['n']} {found['array']} values"
    return f"{found!r}"[:40]


def title(header: Header, path: Path) -> str:
    found = header.values.get("general.name")
    return found if isinstance(found, str) else path.stem


def file_type(header: Header) -> str:
    code = header.values.get("general.file_type")
    if not is_integer(code):
        return "unknown"
    try:
        return gguf.LlamaFileType(code).name.removeprefix("MOSTLY_")
    except ValueError:
        return f"type {code}"


def bytes_by_kind(meta: ModelMetadata) -> dict[str, int]:
    """Non-layer tensors grouped as the planner needs them: embedding, output, the rest."""
    grouped = defaultdict(int)
    for name, size in meta.other_tensors.items():
        kind = "token_embd" if name.startswith("token_embd") else "output" if name.startswith("output") else "other"
        grouped[kind] += size
    return dict(grouped)
