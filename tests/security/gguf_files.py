"""Hostile GGUF files for the security tests, written with the gguf package.

Small models of tiny tensors whose header says what a test wants (a block_count of another type or size,
a huge metadata array, layers without tensors), and one that starts from a real header: the bundled
SmolLM2's every key (its tokenizer's 49k tokens and merges included) over tiny tensors, about 1.8 MB.
"""

import struct
import tempfile
from functools import lru_cache
from pathlib import Path

import gguf
import numpy as np

from models_app.library.bundled import bundled_model_path

T = gguf.GGUFValueType
ALIGNMENT = 32  # the data section starts aligned; splicing whole multiples of it keeps every offset valid
WIDTHS = {T.UINT8: 1, T.INT8: 1, T.UINT16: 2, T.INT16: 2, T.UINT32: 4, T.INT32: 4, T.UINT64: 8, T.INT64: 8}


def write_model(path: Path, arch: str = "qwen2", layers: int = 4, values: dict | None = None,
                tensor_layers=None, width: int = 32, more_tensors: tuple[str, ...] = ()) -> Path:
    """A model with `layers` layers of tiny f32 tensors. `values` adds or replaces keys as {key: (value,
    type)} or {key: (value, type, sub_type)} ("{arch}" in a key stands for the architecture); `tensor_layers`
    says which blk.N get tensors (all by default); `more_tensors` names more."""
    keys = {
        "{arch}.block_count": (layers, T.UINT32), "{arch}.context_length": (2048, T.UINT32),
        "{arch}.embedding_length": (width, T.UINT32), "{arch}.attention.head_count": (4, T.UINT32),
        "{arch}.attention.head_count_kv": (2, T.UINT32), "general.name": (f"test-{arch}", T.STRING),
        "general.file_type": (int(gguf.LlamaFileType.ALL_F32), T.UINT32),
    }
    named = {key.replace("{arch}", arch): value for key, value in keys.items()}
    named.update({key.replace("{arch}", arch): value for key, value in (values or {}).items()})
    writer = gguf.GGUFWriter(str(path), arch)
    for key, (value, kind, *sub) in named.items():
        writer.add_key_value(key, value, kind, *sub)
    writer.add_tensor("token_embd.weight", np.zeros((8, width), dtype=np.float32))
    for i in range(layers) if tensor_layers is None else tensor_layers:
        writer.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(width, dtype=np.float32))
    writer.add_tensor("output_norm.weight", np.ones(width, dtype=np.float32))
    for name in more_tensors:
        writer.add_tensor(name, np.ones(width, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def with_big_array(path: Path, elements: int, kind: T = T.UINT8) -> Path:
    """A small model whose one extra metadata array holds `elements` zeros of `kind` (the issue's case:
    2,000,000 uint8 in a 2 MB file). Written as a one-element array, then widened in place: the writer
    packs arrays element by element in Python, which would take longer than the test."""
    write_model(path, values={"hostile.padding": ([0], T.ARRAY, kind)})
    size = WIDTHS[kind]
    added = (elements - 1) * size
    assert added % ALIGNMENT == 0, "keep the data section aligned"
    one = struct.pack("<IIQ", T.ARRAY, kind, 1) + bytes(size)
    data = path.read_bytes()
    at = data.index(b"hostile.padding" + one)
    widened = struct.pack("<IIQ", T.ARRAY, kind, elements) + bytes(size * elements)
    path.write_bytes(data[:at + 15] + widened + data[at + 15 + len(one):])
    return path


def with_empty_strings(path: Path, header_mib: int) -> Path:
    """A small model whose one extra metadata array of empty strings fills about `header_mib` MiB: the
    header that costs llama.cpp's reader the most per byte (a std::string of 32 bytes for 8 in the file)."""
    write_model(path, values={"hostile.strings": (["x"], T.ARRAY, T.STRING)})
    one = struct.pack("<IIQQ", T.ARRAY, T.STRING, 1, 1) + b"x"
    n = (header_mib << 20) // 8
    body = struct.pack("<IIQ", T.ARRAY, T.STRING, n) + bytes(8 * (n - 1))
    pad = -(len(body) + 8 - len(one)) % ALIGNMENT  # the last string takes the padding
    body += struct.pack("<Q", pad) + bytes(pad)
    data = path.read_bytes()
    at = data.index(b"hostile.strings" + one) + len(b"hostile.strings")
    path.write_bytes(data[:at] + body + data[at + len(one):])
    return path


@lru_cache(maxsize=1)
def real_header_model() -> bytes:
    """The bundled model's header (every key but the architecture, which the writer adds) over 30 layers of
    tiny tensors: a real tokenizer and real numbers, a file small enough to fuzz."""
    reader = gguf.GGUFReader(str(bundled_model_path()))
    values = {}
    for name, field in reader.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        kind = field.types[0]
        sub = (field.types[-1],) if kind == T.ARRAY else ()
        values[name] = (field.contents(), kind, *sub)
    with tempfile.TemporaryDirectory() as folder:
        return write_model(Path(folder) / "real.gguf", arch="llama", layers=30, values=values).read_bytes()
