"""Stands in for a CPU whose AMX kernels trap (a Xeon in a VM reporting `amx_tile amx_int8 amx_bf16`).

With this folder on PYTHONPATH, a Python process that loads a model with llama.cpp's extra buffer types (the
weight repacking through which ggml reaches its AMX kernels) dies on SIGILL at its first decode of more than one
token, as such a head does on `tilezero` in ggml_backend_amx_mul_mat; a one-token decode passes, as it does
there. A model loaded without them runs as usual. Only the trigger is played: the process really dies on the
signal, and everything after (its exit code, the panel's reading of it) is real. STANDIN_SIGNAL=KILL plays the
kernel's OOM killer ending that process at the same moment instead.
"""

import importlib.abc
import importlib.util
import os
import signal
import sys


def _trap(package) -> None:
    api = package.llama_cpp
    loaded = {"repacked": False}
    load, decode = api.llama_model_load_from_file, api.llama_decode

    def load_and_note(path, params):
        loaded["repacked"] = loaded["repacked"] or bool(params.use_extra_bufts)
        return load(path, params)

    number = getattr(signal, "SIG" + os.environ.get("STANDIN_SIGNAL", "ILL"))

    def decode_or_trap(ctx, batch):
        if loaded["repacked"] and batch.n_tokens > 1:
            signal.signal(number, signal.SIG_DFL)
            os.kill(os.getpid(), number)
        return decode(ctx, batch)

    for module in (api, package):  # the package re-exports the functions under its own names
        module.llama_model_load_from_file, module.llama_decode = load_and_note, decode_or_trap


class _WhenLlamaCppLoads(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "llama_cpp":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        execute = spec.loader.exec_module

        def exec_module(module):
            execute(module)
            _trap(module)

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _WhenLlamaCppLoads())
