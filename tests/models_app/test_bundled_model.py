"""The bundled SmolLM2 model loads in the head's llama-cpp-python and generates text."""

import pytest

from models_app.library.bundled import bundled_model_path
from models_app.llamacpp import cpucheck, libllama


@pytest.fixture(scope="module")
def llm():
    from llama_cpp import Llama

    with cpucheck.loading():  # as the panel's own processes load it
        return Llama(model_path=str(bundled_model_path()), n_ctx=512, n_threads=2, seed=1, verbose=False)


def test_it_finds_the_bundled_model_through_its_package():
    path = bundled_model_path()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert path.read_bytes()[:4] == b"GGUF"


def test_it_generates_a_few_tokens_greedily_and_repeatably(llm):
    prompt = "<|im_start|>user\nName a colour.<|im_end|>\n<|im_start|>assistant\n"
    first = llm(prompt, max_tokens=8, temperature=0.0)
    second = llm(prompt, max_tokens=8, temperature=0.0)
    assert first["usage"]["completion_tokens"] > 0
    assert first["choices"][0]["text"].strip()
    assert first["choices"][0]["text"] == second["choices"][0]["text"]


def test_it_reads_the_models_shape(llm):
    assert llm.n_ctx() == 512
    assert int(llm.metadata["llama.block_count"]) == 30


def test_it_runs_a_llama_cpp_python_built_with_rpc():
    assert libllama.has_rpc_backend()
