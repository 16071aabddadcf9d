"""The bounded reader reads real models as the gguf package's reader did: the bundled model, and every kind
of GGUF file the tests write, give the same ModelMetadata, field for field."""

import pytest

from models_app.gguf.meta import read_metadata
from models_app.library.bundled import bundled_model_path
from tests.models_app.gguf_files import write_gguf, write_loadable_model
from tests.security import gguf_reference
from tests.security.gguf_files import real_header_model, write_model

WRITTEN = {
    "qwen2 with big tensors": lambda path: write_gguf(path),
    "qwen2, small": lambda path: write_gguf(path, big=False, embd=128),
    "llama, 3 layers": lambda path: write_gguf(path, arch="llama", layers=3, big=False),
    "loadable qwen2 with SmolLM2's tokenizer": lambda path: write_loadable_model(path, layers=2, embd=192, ffn=256),
    "the bundled header over tiny tensors": lambda path: path.write_bytes(real_header_model()) and path,
    "a small model from the security tests": lambda path: write_model(path),
}


def test_it_reads_the_bundled_model_as_before():
    path = bundled_model_path()
    assert read_metadata(path).as_dict() == gguf_reference.read_metadata(path).as_dict()


@pytest.mark.parametrize("write", WRITTEN.values(), ids=WRITTEN.keys())
def test_it_reads_the_files_the_tests_write_as_before(tmp_path, write):
    path = write(tmp_path / "model.gguf")
    assert read_metadata(path).as_dict() == gguf_reference.read_metadata(path).as_dict()
