"""The names the rpc-server's cache gives tensors: FNV-1a 64 of their bytes, for the tensors the head's RPC client
asks for by hash (over 10 MiB upstream; every weight with scripts/llama_patches/0002)."""

import os
import subprocess

import gguf
import pytest

from models_app.deploying.tensor_cache import (
    HASH_THRESHOLD,
    cache_name,
    fnv1a_64,
    hash_tensors,
    hash_threshold,
    tensors_per_device,
)
from models_app.library.adding import register_path
from tests.models_app.gguf_files import write_gguf


def llama_cpp_fnv_hash(data: bytes) -> int:
    """ggml-rpc.cpp's fnv_hash, line for line."""
    value = 0xCBF29CE484222325
    for byte in data:
        value = ((value ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return value


def test_it_gives_the_published_fnv1a_64_test_vectors():
    assert cache_name(fnv1a_64(b"")) == "cbf29ce484222325"
    assert cache_name(fnv1a_64(b"a")) == "af63dc4c8601ec8c"
    assert cache_name(fnv1a_64(b"foobar")) == "85944171f73967e8"


def test_it_agrees_with_llama_cpps_loop_on_random_bytes():
    data = os.urandom(4099)
    assert fnv1a_64(data) == llama_cpp_fnv_hash(data)
    assert fnv1a_64(memoryview(data)[7:2000]) == llama_cpp_fnv_hash(data[7:2000])


@pytest.mark.parametrize("threshold", [HASH_THRESHOLD, 0])
def test_it_hashes_exactly_the_tensors_over_the_threshold_from_their_bytes_in_the_file(tmp_path, threshold):
    path = write_gguf(tmp_path / "m.gguf", layers=3)
    hashed = hash_tensors(path, threshold=threshold)
    found = hashed["tensors"]
    reader = gguf.GGUFReader(str(path))
    over = {t.name: t for t in reader.tensors if t.n_bytes > threshold}
    assert set(found) == set(over) and hashed["threshold"] == threshold
    if threshold:
        assert set(found) == {f"blk.{i}.ffn_up.weight" for i in range(3)}
    else:
        assert set(found) == {t.name for t in reader.tensors}
    for name, tensor in over.items():
        assert found[name]["hash"] == cache_name(fnv1a_64(tensor.data.tobytes()))
        assert (found[name]["offset"], found[name]["size"]) == (tensor.data_offset, tensor.n_bytes)


def test_the_checksum_also_records_the_tensor_hashes_the_head_will_be_asked_for(tmp_path, db):
    path = write_gguf(tmp_path / "m.gguf", layers=2)
    model = register_path(path, name="m", checksum_now=True)
    model.refresh_from_db()
    over = {t.name for t in gguf.GGUFReader(str(path)).tensors if t.n_bytes > hash_threshold()}
    assert model.sha256 and set(model.tensor_hashes["tensors"]) == over
    assert {"blk.0.ffn_up.weight", "blk.1.ffn_up.weight"} <= over
    assert model.tensor_hashes["file"]["size"] == model.size
    assert model.tensor_hashes["threshold"] == hash_threshold()


def fake_rpc_library(folder, body: str):
    folder.mkdir()
    source = folder / "rpc.c"
    source.write_text(body)
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(folder / "libggml-rpc.so"), str(source)], check=True)
    return folder


def test_the_threshold_is_the_one_the_heads_rpc_library_reports(tmp_path, monkeypatch):
    folder = fake_rpc_library(tmp_path / "patched", "unsigned long ggml_backend_rpc_hash_threshold(void) "
                                                    "{ return 12345; }")
    monkeypatch.setenv("LLAMA_CPP_LIB_PATH", str(folder))
    assert hash_threshold() == 12345


def test_a_library_that_reports_nothing_or_is_missing_keeps_upstreams_10_mib(tmp_path, monkeypatch):
    monkeypatch.setenv("LLAMA_CPP_LIB_PATH", str(fake_rpc_library(tmp_path / "upstream", "int unrelated;")))
    assert hash_threshold() == HASH_THRESHOLD == 10 * 2**20
    monkeypatch.setenv("LLAMA_CPP_LIB_PATH", str(tmp_path / "nothing-here"))
    assert hash_threshold() == HASH_THRESHOLD


def big(*names: str) -> dict[str, dict]:
    return {name: {"hash": f"{i:016x}", "offset": 0, "size": HASH_THRESHOLD + 1} for i, name in enumerate(names)}


@pytest.mark.parametrize("has_output", [True, False])
def test_each_laptop_gets_its_layers_and_the_last_one_the_output(has_output):
    names = [f"blk.{i}.ffn_up.weight" for i in range(6)] + ["token_embd.weight"]
    tensors = big(*names, *(["output.weight"] if has_output else []))
    # 6 layers + output on two laptops, 4 and 3: laptop 0 holds blocks 0-3, laptop 1 blocks 4-5 and the output.
    first, second = tensors_per_device(tensors, has_output, 6, 7, (4, 3))
    assert set(first) == {f"blk.{i}.ffn_up.weight" for i in range(4)}
    output = "output.weight" if has_output else "token_embd.weight"
    assert set(second) == {"blk.4.ffn_up.weight", "blk.5.ffn_up.weight", output}


def test_layers_kept_on_the_head_go_to_no_laptop():
    tensors = big(*(f"blk.{i}.ffn_up.weight" for i in range(4)), "token_embd.weight", "output.weight")
    (only,) = tensors_per_device(tensors, True, 4, 3, (3,))  # blocks 0-1 on the head's CPU
    assert set(only) == {"blk.2.ffn_up.weight", "blk.3.ffn_up.weight", "output.weight"}
