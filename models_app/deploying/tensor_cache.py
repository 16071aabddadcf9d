"""The rpc-server's tensor cache, seen from the panel: which tensors it caches, under which names, on which laptop.

Facts from the vendored llama.cpp (ggml/src/ggml-rpc/ggml-rpc.cpp): the client
asks a server for a weight by hash only when its data is larger than a threshold
(upstream's HASH_THRESHOLD, 10 MiB; 0 with scripts/llama_patches/0002, which the
head's library then reports); the hash is 64-bit FNV-1a of the tensor's bytes,
and the server keeps it in `<cache>/rpc/%016x`. llama.cpp sets every weight
whole, from the file's bytes (src/llama-model-loader.cpp), so the hash of a
tensor's byte range in the GGUF file is the name the server looks for.
"""

import ctypes
import importlib.util
import mmap
import os
import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from fnv_c.ext._fnv import ffi, lib

from models_app.gguf.reader import read_header
from models_app.planning.planner import placement

HASH_THRESHOLD = 10 * 2**20  # upstream's
LAYER_TENSOR = re.compile(r"^blk\.(\d+)\.")


def fnv1a_64(data) -> int:
    """64-bit FNV-1a of any buffer (bytes, memoryview, mmap), in C without the GIL."""
    view = memoryview(data)
    return lib.fnv1a_64(ffi.from_buffer(view), view.nbytes)


def cache_name(digest: int) -> str:
    return f"{digest:016x}"


def file_stamp(path: Path) -> dict:
    """What tells a file changed since it was hashed, without reading it."""
    stat = os.stat(path)
    return {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


def head_rpc_library() -> Path | None:
    """The head's libggml-rpc.so, where llama-cpp-python loads its libraries from, found without loading them."""
    if os.environ.get("LLAMA_CPP_LIB_PATH"):
        return Path(os.environ["LLAMA_CPP_LIB_PATH"]) / "libggml-rpc.so"
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(spec.submodule_search_locations[0]) / "lib" / "libggml-rpc.so"


def hash_threshold() -> int:
    """Weights over this many bytes go to a server by hash first: what the head's RPC client says it uses, else
    upstream's 10 MiB. Asked of the library itself, because it is what decides, whatever was meant to be built."""
    library = head_rpc_library()
    try:
        asked = getattr(ctypes.CDLL(str(library)), "ggml_backend_rpc_hash_threshold", None) if library else None
    except OSError:  # no llama.cpp here to load anything: nothing to pre-seed beyond what any build caches
        return HASH_THRESHOLD
    if asked is None:
        return HASH_THRESHOLD
    asked.restype, asked.argtypes = ctypes.c_size_t, []
    return int(asked())


def cached_tensors(path: Path, threshold: int) -> dict[str, dict]:
    """Tensors the server would cache: name -> absolute offset and size in the file. Read by llama.cpp's own
    reader (models_app/gguf/reader.py), which takes a fraction of a second where gguf-py's took 4 s of CPU for
    the bundled model's 272 tensors."""
    header = read_header(path, path.name, [])
    return {t.name: {"offset": header.data_offset + t.offset, "size": t.n_bytes}
            for t in header.tensors if t.n_bytes > threshold}


def hash_tensors(path: Path, progress: Callable[[int, int], None] | None = None, workers: int = 0,
                 threshold: int | None = None) -> dict:
    """{"file": stamp, "threshold": bytes, "tensors": {name: {"hash", "offset", "size"}}} for every tensor over
    the threshold (by default the head's own)."""
    path = Path(path)
    threshold = hash_threshold() if threshold is None else threshold
    stamp, tensors = file_stamp(path), cached_tensors(path, threshold)
    total, done = sum(t["size"] for t in tensors.values()), 0
    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        def one(name: str) -> tuple[str, str]:
            spot = tensors[name]
            with memoryview(mapped)[spot["offset"]:spot["offset"] + spot["size"]] as view:
                return name, cache_name(fnv1a_64(view))

        with ThreadPoolExecutor(workers or os.cpu_count() or 1) as pool:
            for name, digest in pool.map(one, list(tensors)):
                tensors[name]["hash"] = digest
                done += tensors[name]["size"]
                if progress:
                    progress(done, total)
    return {"file": stamp, "threshold": threshold, "tensors": tensors}


def tensors_per_device(tensors: dict[str, dict], has_output: bool, n_layer: int, n_gpu_layers: int,
                       tensor_split: tuple[int, ...]) -> list[dict[str, dict]]:
    """The cached tensors each RPC device receives when llama.cpp loads under this split.

    A block's tensors go where its layer goes; the output layer (index n_layer)
    takes `output*`, and when the model has no `output.weight` (`has_output`
    false: tied embeddings) llama.cpp loads a duplicate of `token_embd.weight`
    there as the output. The embedding itself stays on the head.
    """
    where = placement(n_layer, n_gpu_layers, tensor_split)
    devices: list[dict[str, dict]] = [{} for _ in tensor_split]
    for name, info in tensors.items():
        match = LAYER_TENSOR.match(name)
        if match and int(match.group(1)) < n_layer:
            layer = int(match.group(1))
        elif name.startswith("output") or (not has_output and name == "token_embd.weight"):
            layer = n_layer
        else:
            continue
        if where[layer] >= 0:
            devices[where[layer]][name] = info
    return devices
