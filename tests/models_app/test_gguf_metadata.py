"""Reading what a GGUF file holds, and refusing what llama.cpp could not load."""

import pytest

from models_app.gguf.meta import GGUFError, bytes_by_kind, read_metadata
from models_app.library.bundled import bundled_model_path
from tests.models_app.gguf_files import write_gguf


def test_it_reads_the_bundled_models_shape():
    meta = read_metadata(bundled_model_path())
    assert (meta.architecture, meta.n_layer, meta.n_embd, meta.n_head_kv) == ("llama", 30, 576, 3)
    assert meta.context_length == 8192 and meta.vocab_size == 49152 and meta.file_type == "Q4_1"
    assert len(meta.layer_bytes) == 30 and all(2 * 2**20 < b < 2.3 * 2**20 for b in meta.layer_bytes)
    assert 28 * 2**20 < bytes_by_kind(meta)["token_embd"] < 29 * 2**20
    assert sum(meta.layer_bytes) + sum(meta.other_tensors.values()) < meta.file_size


def test_it_reads_another_architecture_with_big_tensors(tmp_path):
    meta = read_metadata(write_gguf(tmp_path / "qwen.gguf"))
    assert (meta.architecture, meta.n_layer, meta.n_head, meta.n_head_kv) == ("qwen2", 4, 8, 2)
    ffn_bytes = 2816 * 1024 * 4
    assert ffn_bytes > 10 * 2**20
    assert meta.layer_bytes == [ffn_bytes + 1024 * 4] * 4
    assert set(meta.other_tensors) == {"token_embd.weight", "output_norm.weight"}


def test_it_refuses_a_file_that_is_not_gguf(tmp_path):
    fake = tmp_path / "model.gguf"
    fake.write_bytes(b"PK\x03\x04 this is a zip renamed to .gguf")
    with pytest.raises(GGUFError, match="not a GGUF file"):
        read_metadata(fake)


def test_it_refuses_a_truncated_file(tmp_path):
    whole = write_gguf(tmp_path / "whole.gguf").read_bytes()
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(GGUFError, match="truncated|damaged"):
        read_metadata(cut)


def test_it_refuses_garbage_after_the_magic(tmp_path):
    garbage = tmp_path / "garbage.gguf"
    garbage.write_bytes(b"GGUF" + bytes(range(256)) * 10)
    with pytest.raises(GGUFError, match="damaged or truncated"):
        read_metadata(garbage)


def test_it_refuses_an_architecture_llama_cpp_does_not_know(tmp_path):
    with pytest.raises(GGUFError, match="does not know"):
        read_metadata(write_gguf(tmp_path / "odd.gguf", arch="nonexistent-arch", big=False))
