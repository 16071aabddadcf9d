"""The runtime bundle runs on older CPUs, picking the variant each one supports.

QEMU's user-mode emulator presents the CPU of an older laptop to the real
ggml-rpc-server binary; the head then runs the bundled model on it and must
get exactly the tokens it gets on its own CPU (no "illegal instruction").
"""

import shutil
import subprocess
import tarfile

import pytest

from models_app.llamacpp import oneshot
from nodes.servers import handshake as rpc
from scripts.llama_source import extract_all
from tests.conftest import free_port, stop, wait_for_port

LAYERS = 6  # of the bundled model's 30 on the emulated laptop
PROMPT = "<|im_start|>user\nWhat is two plus two?<|im_end|>\n<|im_start|>assistant\n"
OLD_CPUS = [
    ("qemu64", "x64"),  # plain x86-64: SSE2 only
    ("Nehalem", "sse42"),  # 2008
    ("SandyBridge", "sandybridge"),  # 2011: AVX without FMA or F16C
]


@pytest.fixture(scope="module")
def bin_dir(runtime_bundle, tmp_path_factory):
    if shutil.which("qemu-x86_64") is None:
        pytest.fail("qemu-user is not installed; `make test` installs it (apt-get install qemu-user).")
    into = tmp_path_factory.mktemp("runtime")
    with tarfile.open(runtime_bundle.tarball) as archive:
        extract_all(archive, into)
    return into / "clusterpanel-runtime" / "bin"


@pytest.fixture(scope="module")
def native_answer():
    return oneshot.complete([], PROMPT, max_tokens=6)["text"]


@pytest.mark.parametrize("cpu, variant", OLD_CPUS)
def test_it_serves_an_older_cpu_with_the_variant_it_supports(bin_dir, native_answer, cpu, variant, tmp_path):
    port = free_port()
    log = tmp_path / "rpc-server.log"
    server = subprocess.Popen(["qemu-x86_64", "-cpu", cpu, str(bin_dir / "ggml-rpc-server"),
                               "-H", "127.0.0.1", "-p", str(port), "-t", "2"],
                              stdout=open(log, "w"), stderr=subprocess.STDOUT)
    try:
        wait_for_port(port, timeout=60, process=server)
        assert f"libggml-cpu-{variant}.so" in log.read_text()
        assert rpc.hello("127.0.0.1", port).devices == 1
        # The last layers on the emulated CPU (every kind of operation a layer has, through its variant's
        # kernels), the rest and the output on the head: the whole model under emulation took 50 s a CPU.
        answer = oneshot.complete([f"127.0.0.1:{port}"], PROMPT, max_tokens=6, timeout=600, n_gpu_layers=LAYERS)
        assert list(answer["placement"].values()).count("RPC0") == LAYERS
        assert answer["text"] == native_answer
    finally:
        stop(server)
