"""Ternary models the tests and benchmarks make themselves: a small llama-architecture model written in f16 with
the `gguf` package, then quantized by llama.cpp's own quantizer to TQ1_0, TQ2_0 or Q4_0.

The quantizer is `llama_model_quantize` in the head's libllama: the function the `llama-quantize` tool calls after
parsing its arguments, from the same vendored llama.cpp and the same build as the laptops' runtime, so no build
of the tool is needed. TQ1_0 and TQ2_0 pack 256 weights a block (QK_K): a tensor whose rows are not a multiple of
256 falls back to Q4_0, so every width here is one (the bundled SmolLM2's 576 is not).

Writing the f16 model and quantizing it takes about 17 s of CPU, and gguf-py's reading of each file's tensors 4 s
more (it makes an object per token of the tokenizer): `quantized_models` and `tensors` keep what they made in the
build cache (settings.BUILD_CACHE_DIR, where scripts/build_llama.py keeps llama.cpp's builds), keyed by a hash of
everything that makes it, and hand out copies."""

import functools
import hashlib
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

import gguf
import numpy as np

from tests.models_app.gguf_files import cache_root, copy_tokenizer

ROOT = Path(__file__).resolve().parents[2]
KEPT_DAYS = 30  # a cached tensor table nothing has read for this long is removed
FILE_TYPES = {name: gguf.LlamaFileType[f"MOSTLY_{name}"] for name in ("TQ1_0", "TQ2_0", "Q4_0", "Q4_K_M")}


def write_llama_model(path: Path, layers: int = 4, embd: int = 512, ffn: int = 1536, seed: int = 0) -> Path:
    """A llama model llama.cpp loads and runs: random f16 weights, SmolLM2's tokenizer, the output tied to the
    token embedding (as SmolLM2's is), heads of 64."""
    from models_app.library.bundled import bundled_model_path

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
from models_app.llamacpp.libllama import load_backends
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


def file_hash(*paths: Path) -> str:
    digest = hashlib.sha256()
    for path in paths:
        with open(path, "rb") as handle:
            digest.update(hashlib.file_digest(handle, "sha256").digest())
    return digest.hexdigest()


def makers_hash(**shape) -> str:
    """A hash of all that makes `quantized_models`' files: the code that writes and quantizes them (this module
    and gguf_files), the gguf and numpy packages, the bundled model (its tokenizer), the head's llama.cpp
    libraries (the quantizer) and the shape asked for."""
    from models_app.library.bundled import bundled_model_path
    from models_app.llamacpp.libllama import lib_dir

    here = Path(__file__).resolve()
    libraries = sorted(path for path in lib_dir().iterdir() if path.is_file() and ".so" in path.name)
    return hashlib.sha256(json.dumps({
        "code": file_hash(here, here.with_name("gguf_files.py")),
        "packages": [importlib.metadata.version(name) for name in ("gguf", "numpy")],
        "bundled": file_hash(bundled_model_path()), "llama.cpp": file_hash(*libraries),
        "libraries": [path.name for path in libraries], "shape": shape,
    }, sort_keys=True).encode()).hexdigest()


def quantized_models(folder: Path, kinds: tuple[str, ...], layers: int = 4, embd: int = 512, ffn: int = 1536,
                     seed: int = 0) -> dict[str, Path]:
    """`write_llama_model(layers, embd, ffn, seed)` quantized to each of `kinds`, at folder/test-<kind>.gguf: copies
    of files made once and kept in the build cache under a hash of all that makes them (`makers_hash`), so a
    change to any of it makes them again. Without a cache to write, made here each time."""
    shape = {"layers": layers, "embd": embd, "ffn": ffn, "seed": seed, "kinds": sorted(kinds)}
    names = {kind: f"test-{kind.lower()}.gguf" for kind in kinds}
    root = cache_root()
    kept = root / f"ternary-{makers_hash(**shape)[:24]}" if root else None
    if kept is None or not all((kept / name).is_file() for name in names.values()):
        making = Path(tempfile.mkdtemp(prefix="making-", dir=root or folder))
        making.chmod(0o755)
        try:
            source = write_llama_model(making / "f16.gguf", layers=layers, embd=embd, ffn=ffn, seed=seed)
            for kind, name in names.items():
                quantize(source, making / name, kind)
            source.unlink()
            if kept is None:
                return {kind: Path(shutil.move(making / name, folder / name)) for kind, name in names.items()}
            for old in [*root.glob("ternary-*"), *root.glob("making-*")]:
                # made by other code, libraries or models, or left by a run that was killed: nothing reads them
                if old != kept and old != making and (old.name.startswith("ternary-") or
                                                      old.stat().st_mtime < time.time() - 3600):
                    shutil.rmtree(old, ignore_errors=True)
            try:
                making.rename(kept)
            except OSError:  # another run kept the same files first
                pass
        finally:
            shutil.rmtree(making, ignore_errors=True)
    return {kind: Path(shutil.copyfile(kept / name, folder / name)) for kind, name in names.items()}


class Tensor(NamedTuple):
    name: str
    tensor_type: gguf.GGMLQuantizationType
    n_elements: int
    n_bytes: int


@functools.cache
def tensors(path: Path) -> dict[str, Tensor]:
    """Each tensor by name (its tensor_type, n_elements, n_bytes), read by the `gguf` package's own reader, not by
    the panel's. Its reading takes seconds (it builds an object per token of the tokenizer): what it read is
    kept in the build cache under the hash of the file's bytes and the gguf package's version."""
    root = cache_root()
    kept = root / "gguf-tensors" / f"{file_hash(path)[:32]}-gguf-{importlib.metadata.version('gguf')}.json" \
        if root else None
    if kept and kept.is_file():
        kept.touch()
        table = json.loads(kept.read_text())
    else:
        table = [[t.name, t.tensor_type.name, int(t.n_elements), int(t.n_bytes)]
                 for t in gguf.GGUFReader(str(path)).tensors]
        if kept:
            kept.parent.mkdir(exist_ok=True)
            for old in kept.parent.glob("*.json"):
                if old.stat().st_mtime < time.time() - KEPT_DAYS * 86400:
                    old.unlink(missing_ok=True)
            partial = kept.with_suffix(f".{os.getpid()}.part")
            partial.write_text(json.dumps(table))
            partial.rename(kept)
    return {name: Tensor(name, gguf.GGMLQuantizationType[kind], n_elements, n_bytes)
            for name, kind, n_elements, n_bytes in table}
