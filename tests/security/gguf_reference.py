"""The GGUF reader as it was before issue 12 (the gguf package, unbounded), kept only to show that the bounded
reader reads real models the same: tests/security/test_gguf_same_metadata.py and bench/gguf_validation.py.
Never use it on a file you do not trust: a 2 MB header can cost it gigabytes.
"""

import re
from pathlib import Path

import gguf

from models_app.gguf.meta import GGUFError, ModelMetadata  # the same result type: compared whole

KNOWN_ARCHITECTURES = set(gguf.MODEL_ARCH_NAMES.values())
LAYER_TENSOR = re.compile(r"^blk\.(\d+)\.")


def _scalar(reader: gguf.GGUFReader, key: str, default=None):
    found = reader.fields.get(key)
    if found is None or not found.data:
        return default
    part = found.parts[found.data[0]]
    if found.types and found.types[0] == gguf.GGUFValueType.STRING:
        return bytes(part).decode(errors="replace")
    return part.tolist()[0]


def _largest(reader: gguf.GGUFReader, key: str) -> int:
    """A number some architectures give per layer (an array): the largest."""
    found = reader.fields.get(key)
    if found is None or not found.data:
        return 0
    return int(max(found.parts[i].tolist()[0] for i in found.data))


def check_header(head: bytes, label: str) -> None:
    """The first 8 bytes of a file: GGUF's magic and a version the reader knows, so an upload that is
    not a model is refused after its first chunk."""
    if head[:4] != b"GGUF":
        raise GGUFError(f"{label} is not a GGUF file (it starts with {head[:4]!r}, not b'GGUF').")
    if len(head) < 8:
        raise GGUFError(f"{label} is damaged or truncated: it ends inside its header.")
    versions = {int.from_bytes(head[4:8], order) for order in ("little", "big")}  # files of either byte order
    if not versions & set(gguf.READER_SUPPORTED_VERSIONS):
        raise GGUFError(f"{label} is damaged or truncated: it says GGUF version {int.from_bytes(head[4:8], 'little')}, "
                        f"and the panel reads versions {', '.join(map(str, gguf.READER_SUPPORTED_VERSIONS))}.")


def _open(path: Path, label: str) -> gguf.GGUFReader:
    with open(path, "rb") as handle:
        check_header(handle.read(8), label)
    try:
        return gguf.GGUFReader(str(path))
    except Exception as exc:  # the reader fails in many ways on damaged files; all mean the same here
        raise GGUFError(f"{label} is damaged or truncated: {exc}") from None


def _file_type(reader: gguf.GGUFReader) -> str:
    code = _scalar(reader, "general.file_type")
    try:
        return gguf.LlamaFileType(code).name.removeprefix("MOSTLY_") if code is not None else "unknown"
    except ValueError:
        return f"type {code}"


def read_metadata(path: Path, label: str = "") -> ModelMetadata:
    """`label` names the file in errors when its path means nothing to the reader (an upload's part file)."""
    path = Path(path)
    label = label or path.name
    if not path.is_file():
        raise GGUFError(f"There is no file at {path}.")
    size = path.stat().st_size
    reader = _open(path, label)
    arch = _scalar(reader, "general.architecture")
    if arch not in KNOWN_ARCHITECTURES:
        raise GGUFError(f"{label} is for the architecture {arch!r}, which llama.cpp does not know.")
    n_layer = _scalar(reader, f"{arch}.block_count")
    if not n_layer:
        raise GGUFError(f"{label} does not say how many layers it has ({arch}.block_count).")
    layers, others = [0] * n_layer, {}
    for tensor in reader.tensors:
        if tensor.data_offset + tensor.n_bytes > size:
            raise GGUFError(f"{label} is truncated: tensor {tensor.name} ends past the end of the file.")
        match = LAYER_TENSOR.match(tensor.name)
        if match and int(match.group(1)) < n_layer:
            layers[int(match.group(1))] += int(tensor.n_bytes)
        else:
            others[tensor.name] = int(tensor.n_bytes)
    n_head = _scalar(reader, f"{arch}.attention.head_count", 0)
    tokens = reader.fields.get("tokenizer.ggml.tokens")
    return ModelMetadata(
        architecture=arch, name=_scalar(reader, "general.name", path.stem), n_layer=n_layer,
        n_embd=_scalar(reader, f"{arch}.embedding_length", 0), n_head=n_head,
        n_head_kv=_scalar(reader, f"{arch}.attention.head_count_kv", n_head),
        n_ff=_largest(reader, f"{arch}.feed_forward_length"),
        context_length=_scalar(reader, f"{arch}.context_length", 0),
        vocab_size=_scalar(reader, f"{arch}.vocab_size", len(tokens.data) if tokens else 0),
        file_type=_file_type(reader), file_size=size, layer_bytes=layers, other_tensors=others,
    )
