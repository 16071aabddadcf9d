"""The one door to llama.cpp's own GGUF reader (`ggml/src/gguf.cpp`, in the `libggml-base.so` that ships with
the llama-cpp-python the panel builds), called through ctypes in a short-lived child process.

That reader checks what a hostile header can claim before it allocates: string lengths and array lengths
against the bytes left in its input (and 2^30 at most), a tensor's dimensions (at most 4, none negative), its
element count and byte size for overflow, its type, its offset (tensors must follow one another). What it
allocates still grows with the header, so the child is held to more than that:

- it hands the reader at most MAX_HEADER_BYTES of the file (mapped, not copied), so a claimed array can
  cost no more than the header bytes it really takes;
- it refuses more than MAX_TENSORS tensors or MAX_KEYS keys before the reader starts (each costs hundreds of
  bytes in the reader for a few in the file);
- the kernel holds it to MEMORY_LIMIT of address space and TIME_LIMIT of CPU, and the panel kills it after
  TIME_LIMIT of waiting. A header of 32 MiB of empty strings would cost the reader about 9 times its size
  (a std::string each, copied once): such a file ends the child, and is refused, instead of a web worker.

A child also keeps a GGML_ABORT from ending a web worker, keeps ggml's log lines out of the panel's output
(they become the refusal's reason), and keeps a second libggml-base out of the panel's processes (its SONAME
would capture the one libllama loads later). It starts in about 30 ms with nothing but the standard library.

The child prints JSON: the wanted keys' values (`{arch}` in a key stands for general.architecture), array
lengths, the tensors (name, ggml type, shape, offset, bytes) and its own peak memory.
"""

import ctypes
import hashlib
import importlib.util
import json
import logging
import mmap
import os
import resource
import struct
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

MAX_HEADER_BYTES = 32 << 20  # real headers are 2-10 MB: a tokenizer of 128-262k tokens and its merges
MAX_TENSORS = 1 << 14  # real models have a few hundred to a few thousand
MAX_KEYS = 1 << 14  # real models have 30-60
MAX_ARRAY_VALUES = 4096  # numeric arrays whose values are read back (per-layer numbers); longer ones by length
MAX_TEXT = 200  # characters kept of a string value (the title's column holds 200)
MEMORY_LIMIT = 256 << 20  # address space: 28 MiB for the bundled model's; a 24 MiB header can take 230
TIME_LIMIT = 10
FIXED_HEADER = struct.Struct("<4sIqq")  # magic, version, tensor count, key count

log = logging.getLogger(__name__)


class GGUFError(ValueError):
    pass


@dataclass(frozen=True)
class Tensor:
    name: str
    type: int
    shape: list[int]
    offset: int  # from the start of the data section
    n_bytes: int


@dataclass(frozen=True)
class Header:
    values: dict = field(default_factory=dict)  # key -> int, float, bool, str, or {"array": type, "n", "values"}
    tensors: list[Tensor] = field(default_factory=list)
    data_offset: int = 0
    type_traits: dict[int, tuple[int, int]] = field(default_factory=dict)  # ggml type -> (bytes, block size)
    peak_bytes: int = 0
    seconds: float = 0.0


def read_header(path: Path, label: str, keys: list[str]) -> Header:
    """The header of the GGUF file at `path`, read by llama.cpp's reader within the limits above."""
    started = time.monotonic()
    argv = [sys.executable, "-I", "-S", __file__, library_path(), str(path), *keys]
    try:
        done = subprocess.run(argv, capture_output=True, timeout=TIME_LIMIT, stdin=subprocess.DEVNULL,
                              env={"LC_ALL": "C"}, check=False)
    except subprocess.TimeoutExpired:
        raise GGUFError(f"{label} took more than {TIME_LIMIT} s to read, so the panel gave up on it.") from None
    seconds = time.monotonic() - started
    answer = parsed(done, label)
    log.debug("read the GGUF header of %s in %.2f s, peak %.1f MiB", label, seconds, answer["peak_kb"] / 1024)
    if "refused" in answer:
        raise GGUFError(answer["refused"].replace("{label}", label))
    return Header(values=answer["values"], data_offset=answer["data_offset"],
                  tensors=[Tensor(*t) for t in answer["tensors"]],
                  type_traits={int(k): tuple(v) for k, v in answer["traits"].items()},
                  peak_bytes=answer["peak_kb"] * 1024, seconds=seconds)


def parsed(done: subprocess.CompletedProcess, label: str) -> dict:
    if done.returncode == 0:
        try:
            return json.loads(done.stdout)
        except ValueError:
            raise GGUFError(f"The panel could not read {label}: its reader answered nothing it understood.") from None
    if done.returncode < 0:  # killed: out of CPU time, or an abort inside the reader (no memory, a check)
        raise GGUFError(f"llama.cpp's GGUF reader could not read {label} within the panel's limits "
                        f"({MEMORY_LIMIT >> 20} MiB of memory, {TIME_LIMIT} s; it ended with signal "
                        f"{-done.returncode}): the file is damaged or built to exhaust them.")
    last = (done.stderr.decode(errors="replace").strip().splitlines() or ["no output"])[-1]
    raise GGUFError(f"The panel could not read {label}: {last}.")


def library_path() -> str:
    """libggml-base from the installed llama_cpp package, found without importing it (that loads libllama)."""
    spec = importlib.util.find_spec("llama_cpp")
    folders = list(spec.submodule_search_locations or []) if spec else []
    for folder in folders:
        candidate = Path(folder) / "lib" / "libggml-base.so"
        if candidate.is_file():
            return str(candidate)
    raise GGUFError("llama.cpp's GGUF reader (libggml-base.so in llama-cpp-python) is not installed; "
                    "run make setup.")


# Everything below runs in the child, with only the standard library.

GGUF_STRING, GGUF_ARRAY = 8, 9
DIGEST = "digest:"  # a wanted key "digest:[<n>:]<key>": the SHA-256 of that string array (`digested`), not its length
GGUF_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
GGUF_TYPE_NAMES = {0: "uint8", 1: "int8", 2: "uint16", 3: "int16", 4: "uint32", 5: "int32", 6: "float32",
                   7: "bool", 8: "string", 10: "uint64", 11: "int64", 12: "float64"}
LOG_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)


class InitParams(ctypes.Structure):
    _fields_ = [("no_alloc", ctypes.c_bool), ("ctx", ctypes.c_void_p)]


class Refused(Exception):
    pass


def bind(lib: ctypes.CDLL) -> ctypes.CDLL:
    signatures = {
        "gguf_init_from_buffer": (ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_size_t, InitParams]),
        "gguf_free": (None, [ctypes.c_void_p]),
        "gguf_get_data_offset": (ctypes.c_size_t, [ctypes.c_void_p]),
        "gguf_find_key": (ctypes.c_int64, [ctypes.c_void_p, ctypes.c_char_p]),
        "gguf_get_kv_type": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_int64]),
        "gguf_get_arr_type": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_int64]),
        "gguf_get_arr_n": (ctypes.c_size_t, [ctypes.c_void_p, ctypes.c_int64]),
        "gguf_get_arr_data": (ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_int64]),
        "gguf_get_val_data": (ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_int64]),
        "gguf_get_val_str": (ctypes.c_char_p, [ctypes.c_void_p, ctypes.c_int64]),
        "gguf_get_arr_str": (ctypes.c_char_p, [ctypes.c_void_p, ctypes.c_int64, ctypes.c_size_t]),
        "gguf_get_n_tensors": (ctypes.c_int64, [ctypes.c_void_p]),
        "gguf_get_tensor_name": (ctypes.c_char_p, [ctypes.c_void_p, ctypes.c_int64]),
        "gguf_get_tensor_type": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_int64]),
        "gguf_get_tensor_ne": (ctypes.POINTER(ctypes.c_int64), [ctypes.c_void_p, ctypes.c_int64]),
        "gguf_get_tensor_offset": (ctypes.c_size_t, [ctypes.c_void_p, ctypes.c_int64]),
        "gguf_get_tensor_size": (ctypes.c_size_t, [ctypes.c_void_p, ctypes.c_int64]),
        "ggml_type_size": (ctypes.c_size_t, [ctypes.c_int]),
        "ggml_blck_size": (ctypes.c_int64, [ctypes.c_int]),
        "ggml_log_set": (None, [LOG_CALLBACK, ctypes.c_void_p]),
    }
    for name, (restype, argtypes) in signatures.items():
        function = getattr(lib, name)
        function.restype, function.argtypes = restype, argtypes
    return lib


def check_counts(fixed: bytes) -> None:
    if len(fixed) < FIXED_HEADER.size:
        raise Refused("{label} is damaged or truncated: it ends inside its header.")
    _, _, n_tensors, n_keys = FIXED_HEADER.unpack(fixed)
    if not 0 <= n_tensors <= MAX_TENSORS:
        raise Refused(f"{{label}} says it holds {n_tensors} tensors; the panel reads models of up to "
                      f"{MAX_TENSORS}.")
    if not 0 <= n_keys <= MAX_KEYS:
        raise Refused(f"{{label}} says it holds {n_keys} metadata keys; the panel reads models of up to {MAX_KEYS}.")


def text(raw: bytes) -> str:
    """At most MAX_TEXT printable characters: names from a file end up in one-line refusals and on pages."""
    return "".join(c if c.isprintable() else "\ufffd" for c in raw.decode(errors="replace")[:MAX_TEXT])


def value(lib, ctx, index: int):
    kind = lib.gguf_get_kv_type(ctx, index)
    if kind == GGUF_STRING:
        return text(lib.gguf_get_val_str(ctx, index))
    if kind == GGUF_ARRAY:
        return array(lib, ctx, index)
    code = GGUF_SCALARS[kind]
    return struct.unpack(code, ctypes.string_at(lib.gguf_get_val_data(ctx, index), struct.calcsize(code)))[0]


def array(lib, ctx, index: int) -> dict:
    kind, n = lib.gguf_get_arr_type(ctx, index), lib.gguf_get_arr_n(ctx, index)
    described = {"array": GGUF_TYPE_NAMES.get(kind, str(kind)), "n": n, "values": None}
    if kind in GGUF_SCALARS and n <= MAX_ARRAY_VALUES:
        code = GGUF_SCALARS[kind]
        raw = ctypes.string_at(lib.gguf_get_arr_data(ctx, index), n * struct.calcsize(code)) if n else b""
        described["values"] = list(struct.unpack(f"<{n}{code}", raw))
    return described


def values(lib, ctx, keys: list[str]) -> dict:
    found = {}
    arch_index = lib.gguf_find_key(ctx, b"general.architecture")
    arch = value(lib, ctx, arch_index) if arch_index >= 0 else None
    for key in keys:
        if "{arch}" in key and not isinstance(arch, str):
            continue
        digest, name, first = key.startswith(DIGEST), key, None
        if digest:  # "digest:<key>" or "digest:<n>:<key>"
            count, _, rest = key.removeprefix(DIGEST).partition(":")
            first, name = (int(count), rest) if count.isdigit() and rest else (None, key.removeprefix(DIGEST))
        name = name.replace("{arch}", arch) if "{arch}" in name else name  # arch may be a number or a list
        index = lib.gguf_find_key(ctx, name.encode())
        if index >= 0:
            found[key if digest else name] = digested(lib, ctx, index, first) if digest else value(lib, ctx, index)
    return found


def digested(lib, ctx, index: int, first: int | None) -> str | None:
    """SHA-256 of a string array's strings (its `first` ones, if given), each ended by a NUL: two vocabularies are
    the same, as far as that, when theirs are."""
    if lib.gguf_get_kv_type(ctx, index) != GGUF_ARRAY or lib.gguf_get_arr_type(ctx, index) != GGUF_STRING:
        return None
    found = hashlib.sha256()
    for i in range(min(lib.gguf_get_arr_n(ctx, index), first if first is not None else 1 << 62)):
        found.update(lib.gguf_get_arr_str(ctx, index, i) + b"\0")
    return found.hexdigest()


def tensors(lib, ctx) -> tuple[list, dict]:
    found, traits = [], {}
    for i in range(lib.gguf_get_n_tensors(ctx)):
        kind = lib.gguf_get_tensor_type(ctx, i)
        shape = lib.gguf_get_tensor_ne(ctx, i)
        found.append([text(lib.gguf_get_tensor_name(ctx, i)), kind, [shape[d] for d in range(4)],
                      lib.gguf_get_tensor_offset(ctx, i), lib.gguf_get_tensor_size(ctx, i)])
        traits[kind] = [lib.ggml_type_size(kind), lib.ggml_blck_size(kind)]
    return found, traits


def reason(lines: list[str]) -> str:
    """The reader's first error line, without the C function's name: the most specific one."""
    for line in lines:
        said = text(line.strip().split(": ", 1)[-1].strip().encode())
        if said:
            return said
    return "it could not read the header"


def read_in_child(library: str, path: str, keys: list[str]) -> dict:
    lines = []
    keep = LOG_CALLBACK(lambda level, message, _: lines.append(message.decode(errors="replace")) if level == 4
                        else None)
    lib = bind(ctypes.CDLL(library))
    lib.ggml_log_set(keep, None)
    with open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        check_counts(handle.read(FIXED_HEADER.size))
        given = min(size, MAX_HEADER_BYTES)
        with mmap.mmap(handle.fileno(), given, access=mmap.ACCESS_COPY) as mapped:
            window = (ctypes.c_char * given).from_buffer(mapped)
            try:
                return described(lib, ctypes.addressof(window), given, size, keys, lines)
            finally:
                del window


def described(lib, address: int, given: int, size: int, keys: list[str], lines: list[str]) -> dict:
    ctx = lib.gguf_init_from_buffer(address, given, InitParams(True, None))
    if not ctx:
        if given < size:
            raise Refused(f"{{label}} is damaged, or its header is larger than the {MAX_HEADER_BYTES >> 20} MiB "
                          f"the panel reads (llama.cpp's GGUF reader says: {reason(lines)}).")
        raise Refused(f"{{label}} is damaged or truncated (llama.cpp's GGUF reader says: {reason(lines)}).")
    try:
        found, traits = tensors(lib, ctx)
        return {"values": values(lib, ctx, keys), "tensors": found, "traits": traits,
                "data_offset": lib.gguf_get_data_offset(ctx)}
    finally:
        lib.gguf_free(ctx)


def limit_self() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    resource.setrlimit(resource.RLIMIT_CPU, (TIME_LIMIT, TIME_LIMIT))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def child(argv: list[str]) -> None:
    limit_self()
    library, path, *keys = argv
    try:
        answer = read_in_child(library, path, keys)
    except Refused as exc:
        answer = {"refused": str(exc)}
    except MemoryError:
        answer = {"refused": f"{{label}} needs more than the {MEMORY_LIMIT >> 20} MiB the panel gives to reading "
                             f"a header; the file is damaged."}
    except OSError as exc:
        answer = {"refused": f"The panel could not read {{label}}: {exc.strerror or exc}."}
    answer["peak_kb"] = peak_kb()
    sys.stdout.write(json.dumps(answer))


def peak_kb() -> int:
    """This process's peak memory. Not getrusage's ru_maxrss: that survives exec, so a child started from a
    big process (vfork, as subprocess does) would report its parent's peak as its own."""
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))


if __name__ == "__main__":
    child(sys.argv[1:])
