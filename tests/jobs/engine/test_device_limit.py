"""One llama.cpp context over more laptops than upstream's 16 devices (scripts/llama_patches/): the built library
reports the panel's limit, and a model split over 39 rpc-servers loads and answers token for token what it
answers over 3. The servers are the laptops' own binary on loopback, one thread each."""

import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from models_app.llamacpp import oneshot
from nodes.runtime.bundle import MAX_LAPTOPS
from scripts.llama_source import extract_all, patches
from tests.conftest import free_port, stop, wait_for_port
from tests.models_app.gguf_files import write_loadable_model

LAYERS = 40
PROMPT = "The laptops on the shelf"


@pytest.fixture(scope="module")
def rpc_server_binary(runtime_bundle, tmp_path_factory) -> Path:
    into = tmp_path_factory.mktemp("runtime")
    with tarfile.open(runtime_bundle.tarball) as archive:
        extract_all(archive, into)
    return next(into.glob("*/bin/ggml-rpc-server"))


@pytest.fixture(scope="module")
def deep_model(tmp_path_factory) -> Path:
    """40 small layers, so 39 servers each hold at least one."""
    return write_loadable_model(tmp_path_factory.mktemp("model") / "deep.gguf", layers=LAYERS, embd=256, ffn=512)


@pytest.fixture
def servers(rpc_server_binary, tmp_path) -> Iterator:
    started: list[subprocess.Popen] = []

    def start(count: int) -> list[str]:
        endpoints = []
        for i in range(count):
            port = free_port()
            log = open(tmp_path / f"rpc-{i}.log", "w")
            process = subprocess.Popen([str(rpc_server_binary), "-H", "127.0.0.1", "-p", str(port), "-t", "1"],
                                       stdout=log, stderr=subprocess.STDOUT)
            started.append(process)
            wait_for_port(port, process=process)
            endpoints.append(f"127.0.0.1:{port}")
        return endpoints

    try:
        yield start
    finally:
        for process in started:
            stop(process)


def even_split(layers: int, devices: int) -> tuple[int, ...]:
    return tuple(layers // devices + (i < layers % devices) for i in range(devices))


def test_the_built_library_reports_the_panels_limit(runtime_bundle):
    reported = subprocess.run([sys.executable, "-c", "import llama_cpp; print(llama_cpp.llama_max_devices())"],
                              capture_output=True, text=True, check=True).stdout.strip()
    assert int(reported) == MAX_LAPTOPS > 16
    assert runtime_bundle.manifest["llama_cpp_patches"] == [patch.name for patch in patches()]


def test_a_model_over_39_servers_answers_as_over_3(servers, deep_model):
    over_3 = oneshot.complete(servers(3), PROMPT, 12, model=deep_model, n_gpu_layers=LAYERS + 1,
                              tensor_split=even_split(LAYERS, 3), timeout=300)
    endpoints = servers(39)
    over_39 = oneshot.complete(endpoints, PROMPT, 12, model=deep_model, n_gpu_layers=LAYERS + 1,
                               tensor_split=even_split(LAYERS, 39), timeout=600)
    assert over_39["text"] == over_3["text"] and over_39["completion_tokens"] == over_3["completion_tokens"] == 12
    # every one of the 39 servers holds layers: llama.cpp's log places them on 39 distinct RPC devices
    assert len(set(over_39["placement"].values())) == 39
