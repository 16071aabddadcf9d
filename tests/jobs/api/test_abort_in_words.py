"""A llama.cpp process that aborts is reported with ggml's own reason, never with a debugger's chatter."""

import subprocess
import sys

from models_app.llamacpp.oneshot import failure

ABORT_LOG = """llama_model_load_from_file_impl: using device RPC16 (RPC) - 1950 MiB free
/root/.cache/clusterpanel/x/vendor/llama.cpp/ggml/src/ggml-backend.cpp:1872: GGML_ASSERT(n_backends <= 16) failed
"""


def test_an_abort_names_ggmls_reason_and_where():
    said = failure(-6, ABORT_LOG)
    assert said == "llama.cpp aborted (SIGABRT) at ggml-backend.cpp: GGML_ASSERT(n_backends <= 16) failed"


def test_a_death_without_a_reason_is_named_alone():
    assert failure(-9, "llama_model_load: loading\n") == \
        "llama.cpp was killed (SIGKILL), perhaps by the kernel for want of memory"


def test_processes_that_load_llama_cpp_print_no_backtrace():
    code = "import os, models_app.llamacpp.libllama; print(os.environ.get('GGML_NO_BACKTRACE'))"
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={"PATH": "/usr/bin:/bin"}).stdout.strip()
    assert shown == "1", "ggml would run gdb on itself as it aborts, and gdb's output would end the log"
