"""The seed articles' models as sparse GGUF files (bench/sparse_gguf.py): the panel's reader sees their real
shape and size."""

import pytest

from bench.sparse_gguf import MODELS, main, write_sparse
from models_app.gguf_meta import read_metadata
from models_app.gguf_reader import read_header

Q4_K_M_TYPES = {"Q5_K": 13, "Q6_K": 14, "Q5_0": 6, "Q8_0": 8}  # ggml type numbers


@pytest.mark.parametrize("key, layers, tensors", [("qwen2.5-72b", 80, 963), ("llama-3-70b", 80, 723),
                                                   ("qwen3-next-80b", 48, 843)])
def test_it_reads_a_sparse_model_with_its_real_shape_and_size(tmp_path, key, layers, tensors):
    spec = MODELS[key]
    written = write_sparse(spec, tmp_path / f"{key}.gguf")
    meta = read_metadata(written.path)
    header = read_header(written.path, key, [])
    assert (meta.architecture, meta.n_layer, meta.file_type) == (spec.arch, layers, "Q4_K_M")
    assert len(header.tensors) == tensors
    assert meta.file_size == written.file_size
    assert abs(meta.file_size / spec.published_bytes - 1) < 0.005  # the hubs' file, to within 0.5 %
    held = sum(meta.layer_bytes) + sum(meta.other_tensors.values())
    assert 0 <= meta.file_size - header.data_offset - held < 32 * tensors  # only alignment padding besides
    assert written.disk_bytes < 16 << 20  # the weights are a hole


def test_it_gives_qwen_72b_the_types_llama_cpps_q4_k_m_gives_it(tmp_path):
    header = read_header(write_sparse(MODELS["qwen2.5-72b"], tmp_path / "qwen.gguf").path, "qwen", [])
    types = {tensor.name: tensor.type for tensor in header.tensors}
    more_bits = {i for i in range(80) if i < 10 or i >= 70 or (i - 10) % 3 == 2}
    assert types["output.weight"] == Q4_K_M_TYPES["Q6_K"]
    for i in range(80):
        assert types[f"blk.{i}.attn_v.weight"] == Q4_K_M_TYPES["Q6_K" if i in more_bits else "Q5_K"]
        # 29568 columns are no multiple of 256: llama.cpp falls back to the 32-wide Q8_0 and Q5_0
        assert types[f"blk.{i}.ffn_down.weight"] == Q4_K_M_TYPES["Q8_0" if i in more_bits else "Q5_0"]


def test_it_refuses_to_overwrite_a_file(tmp_path, capsys):
    existing = tmp_path / "model.gguf"
    existing.write_bytes(b"mine")
    with pytest.raises(SystemExit):
        main(["llama-3-70b", str(existing)])
    assert existing.read_bytes() == b"mine"
    assert "already exists" in capsys.readouterr().err
