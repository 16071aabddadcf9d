"""The door to llama.cpp in the head (llama-cpp-python's libraries).

ggml's RPC client aborts the whole process when a server is unreachable or
misbehaves, so every call that talks to a server runs in a child process.
"""

import contextlib
import ctypes
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

# ggml prints a backtrace as it aborts by running gdb on itself: gdb's chatter then ends the log the panel shows
# ("Modules/main.c: No such file or directory") instead of the reason, which ggml prints just before.
os.environ.setdefault("GGML_NO_BACKTRACE", "1")


class LlamaCppError(RuntimeError):
    pass


def lib_dir() -> Path:
    """Where llama-cpp-python loads libllama from (LLAMA_CPP_LIB_PATH overrides its own lib/, as there)."""
    import llama_cpp  # here, not at the top: web processes import this module without needing libllama

    return Path(os.environ.get("LLAMA_CPP_LIB_PATH") or Path(llama_cpp.__file__).parent / "lib")


def _loaded_library(name: str) -> ctypes.CDLL:
    """The copy of a library (`libggml.so`, `libggml-rpc.so`) that libllama itself uses.

    The wheel holds libggml.so, libggml.so.0 and libggml.so.0.x as separate
    files (wheels keep no symlinks); opening the wrong one gives a second ggml
    with its own backend registry, and RPC servers registered there are
    silently ignored by llama.cpp.
    """
    import llama_cpp  # noqa: F401 (loads libllama and, through it, its libggml)

    here = lib_dir().resolve()  # the maps name real paths; a virtualenv may be reached through a symlink
    for line in Path("/proc/self/maps").read_text().splitlines():
        path = Path(line.split()[-1])
        if (path.name == name or path.name.startswith(name + ".")) and path.parent == here:
            return ctypes.CDLL(str(path))
    return ctypes.CDLL(name)


_backends_loaded = False


def load_backends() -> None:
    """ggml's backends, from the folder libllama came from, once per process before anything else uses them.

    The head's ggml is the laptops' (scripts/build_llama.py): built with GGML_BACKEND_DL, its CPU code is one
    library per instruction-set level, picked at run time by what this CPU scores best on, and RPC is a library
    of its own. llama.cpp looks for them only beside the executable (here, python) and in the working folder.
    A ggml with its backends linked in has them registered already and loads nothing here.
    """
    global _backends_loaded
    if _backends_loaded:
        return
    import llama_cpp

    ggml = _loaded_library("libggml.so")
    ggml.ggml_backend_reg_count.restype = ctypes.c_size_t
    if ggml.ggml_backend_reg_count() == 0:
        ggml.ggml_backend_load_all_from_path.argtypes = [ctypes.c_char_p]
        ggml.ggml_backend_load_all_from_path(str(lib_dir()).encode())
    llama_cpp.llama_backend_init()
    _backends_loaded = True


def load_ggml() -> ctypes.CDLL:
    load_backends()
    ggml = _loaded_library("libggml.so")
    ggml.ggml_backend_reg_by_name.restype = ctypes.c_void_p
    ggml.ggml_backend_reg_by_name.argtypes = [ctypes.c_char_p]
    return ggml


def has_rpc_backend() -> bool:
    """True when llama-cpp-python was built with GGML_RPC (a plain PyPI build is not)."""
    return bool(load_ggml().ggml_backend_reg_by_name(b"RPC"))


def _device_memory_in_this_process(endpoint: str) -> dict:
    load_backends()
    rpc = _loaded_library("libggml-rpc.so")
    rpc.ggml_backend_rpc_get_device_memory.argtypes = [
        ctypes.c_char_p, ctypes.c_uint32, ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_size_t)]
    free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
    rpc.ggml_backend_rpc_get_device_memory(endpoint.encode(), 0, ctypes.byref(free), ctypes.byref(total))
    return {"free": free.value, "total": total.value}


def rpc_device_memory(endpoint: str, timeout: float = 30.0) -> dict:
    """Free and total bytes of device 0 of the server at `host:port`, asked by ggml's own client."""
    code = ("import json, models_app.llamacpp.libllama as l; "
            f"print(json.dumps(l._device_memory_in_this_process({endpoint!r})))")
    try:
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout,
                                cwd=Path(__file__).resolve().parents[2])
    except subprocess.TimeoutExpired:
        raise LlamaCppError(f"ggml's RPC client got no answer from {endpoint} within {timeout:.0f} s") from None
    if result.returncode != 0:
        reason = result.stderr.strip().splitlines()[-1:] or [f"exit code {result.returncode}"]
        raise LlamaCppError(f"ggml's RPC client failed against {endpoint}: {reason[0]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def register_rpc_servers(endpoints: list[str]) -> None:
    """Make each `host:port` a llama.cpp device, in order, before any model loads.

    The backend must be initialised first; registered the other way round, the
    model silently loads on the head's CPU. Unreachable servers abort the process.
    """
    ggml = load_ggml()
    ggml.ggml_backend_reg_get_proc_address.restype = ctypes.c_void_p
    ggml.ggml_backend_reg_get_proc_address.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    ggml.ggml_backend_register.argtypes = [ctypes.c_void_p]
    rpc_reg = ggml.ggml_backend_reg_by_name(b"RPC")
    if not rpc_reg:
        raise LlamaCppError("this llama-cpp-python was built without GGML_RPC")
    address = ggml.ggml_backend_reg_get_proc_address(rpc_reg, b"ggml_backend_rpc_add_server")
    add_server = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_char_p)(address)
    for endpoint in endpoints:
        server_reg = add_server(endpoint.encode())
        if not server_reg:
            raise LlamaCppError(f"llama.cpp could not add the RPC server {endpoint}")
        ggml.ggml_backend_register(server_reg)


@contextlib.contextmanager
def model_params(extra_buffers: bool = True, progress: Callable[[float], None] | None = None,
                 cpu_only: bool = False) -> Iterator[None]:
    """Models loaded meanwhile use llama.cpp's extra buffer types (weights repacked for AMX and the like) only if
    `extra_buffers`, report their load progress to `progress`, and with `cpu_only` use none of the process's other
    devices (a draft model beside an engine whose laptops are RPC devices: without a list, llama.cpp gives a model
    every device, and its context a backend on each): llama-cpp-python takes none of these, so its default model
    parameters get them."""
    from llama_cpp import llama as llama_module

    load_backends()
    api = llama_module.llama_cpp
    original = api.llama_model_default_params

    def on_progress(fraction: float, user_data) -> bool:
        progress(float(fraction))
        return True

    callback = api.llama_progress_callback(on_progress) if progress else None
    no_devices = (ctypes.c_void_p * 1)(None)

    def adjusted():
        params = original()
        params.use_extra_bufts = extra_buffers
        if callback:
            params.progress_callback = callback
        if cpu_only:
            params.devices = ctypes.addressof(no_devices)  # NULL-terminated and empty: the CPU alone
        return params

    api.llama_model_default_params = adjusted
    try:
        yield
    finally:
        api.llama_model_default_params = original
