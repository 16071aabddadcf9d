"""The seed articles' models as sparse GGUF files (bench/sparse_gguf.py): the panel's reader sees their real
shape and size, and the planner plans them, or says in numbers why not (bench/seed_scenarios.py)."""

import re
import socket

import pytest

from bench.llama_sizes import llama_says, local_rpc_servers
from bench.seed_scenarios import HEAD, LAPTOP_16, OLD_8, refusal_lines
from bench.sparse_gguf import MODELS, main, write_sparse
from models_app.gguf.meta import read_metadata
from models_app.gguf.reader import read_header
from models_app.planning import planner

GiB = 2**30
OPTIONS = planner.Options(ctx=2048, slots=1, head_may_hold_layers=False)
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


def test_it_plans_qwen_72b_over_the_articles_four_16_gb_laptops(tmp_path):
    shape = planner.shape_of(read_metadata(write_sparse(MODELS["qwen2.5-72b"], tmp_path / "q.gguf").path))
    laptops = LAPTOP_16.machines(4, "lab")
    for mode in ("fastest", "even"):
        plan = planner.plan_mode(mode, shape, HEAD, laptops, OPTIONS)
        assert plan is not None, mode
        assert [stage.machine.name for stage in plan.stages[1:] if stage.count] == ["lab-1", "lab-2", "lab-3", "lab-4"]
        assert sum(stage.count for stage in plan.stages) == 81  # 80 blocks and the output
        assert all(stage.memory.total <= stage.machine.usable_bytes for stage in plan.stages)


@pytest.mark.parametrize("key, laptop, count", [("qwen2.5-72b", LAPTOP_16, 3), ("qwen3-next-80b", OLD_8, 4)])
def test_it_explains_in_numbers_why_too_few_laptops_cannot_hold_the_model(tmp_path, key, laptop, count):
    shape = planner.shape_of(read_metadata(write_sparse(MODELS[key], tmp_path / "m.gguf").path))
    laptops = laptop.machines(count, "lab")
    assert planner.plan_mode("fastest", shape, HEAD, laptops, OPTIONS) is None
    lines = refusal_lines(shape, laptops, OPTIONS)
    said = re.search(r"needs ([\d.]+) GiB; the chosen machines have ([\d.]+) GiB usable, ([\d.]+) GiB short", lines[0])
    needed, usable, short = (float(x) for x in said.groups())
    assert needed > (sum(shape.layer_bytes) + shape.output_bytes) / GiB
    assert usable == round(count * laptops[0].usable_bytes / GiB, 1)
    assert short == pytest.approx(needed - usable, abs=0.11)
    assert sum("**over by" in line for line in lines) == count  # each laptop of the even split, by how much


def test_it_refuses_to_overwrite_a_file(tmp_path, capsys):
    existing = tmp_path / "model.gguf"
    existing.write_bytes(b"mine")
    with pytest.raises(SystemExit):
        main(["llama-3-70b", str(existing)])
    assert existing.read_bytes() == b"mine"
    assert "already exists" in capsys.readouterr().err


def test_it_says_why_it_cannot_write_and_leaves_nothing(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["llama-3-70b", str(tmp_path / "no-such-folder" / "model.gguf")])
    said = capsys.readouterr().err
    assert "could not write" in said and "No such file or directory" in said
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("key, kv_layers, kv_width", [("qwen2.5-72b", 80, 8 * 128), ("llama-3-70b", 80, 8 * 128),
                                                      ("qwen3-next-80b", 12, 2 * 256)])
def test_it_writes_files_llama_cpp_itself_sizes_as_the_real_model(tmp_path, key, kv_layers, kv_width):
    """llama.cpp's loader refuses a missing or misshapen tensor; sizing a context (no_alloc) it says how big
    the KV cache is: every layer's for the dense models, every fourth one's for Qwen3-Next's hybrid."""
    written = write_sparse(MODELS[key], tmp_path / f"{key}.gguf")
    said = llama_says(written.path, 2048)
    assert said["KV cache"] == kv_layers * 2 * 2048 * kv_width * 2 / 2**20  # keys and values, f16
    assert (said["recurrent state"] > 0) == (key == "qwen3-next-80b")
    assert said["compute buffer"] > 0


def test_it_sizes_each_rpc_server_of_a_split_and_stops_the_servers(tmp_path):
    written = write_sparse(MODELS["llama-3-70b"], tmp_path / "llama.gguf")
    (tmp_path / "runtime").mkdir()
    with local_rpc_servers(2, tmp_path / "runtime") as ports:
        said = llama_says(written.path, 2048, (40, 41), ports)
    assert len(said["devices"]) == 2 and all(mib > 0 for mib in said["devices"])
    for port in ports:
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=1)
