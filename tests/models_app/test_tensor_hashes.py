"""The names the rpc-server's cache gives tensors: FNV-1a 64 of their bytes, for the tensors over 10 MiB."""

import os

import gguf
import pytest

from models_app.library import register_path
from models_app.tensor_cache import HASH_THRESHOLD, cache_name, fnv1a_64, hash_tensors, tensors_per_device
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


def test_it_hashes_exactly_the_tensors_over_the_threshold_from_their_bytes_in_the_file(tmp_path):
    path = write_gguf(tmp_path / "m.gguf", layers=3)
    found = hash_tensors(path)["tensors"]
    reader = gguf.GGUFReader(str(path))
    big = {t.name: t for t in reader.tensors if t.n_bytes > HASH_THRESHOLD}
    assert set(found) == {f"blk.{i}.ffn_up.weight" for i in range(3)} == set(big)
    for name, tensor in big.items():
        assert found[name]["hash"] == cache_name(fnv1a_64(tensor.data.tobytes()))
        assert (found[name]["offset"], found[name]["size"]) == (tensor.data_offset, tensor.n_bytes)


def test_the_checksum_also_records_the_tensor_hashes(tmp_path, db):
    model = register_path(write_gguf(tmp_path / "m.gguf", layers=2), name="m", checksum_now=True)
    model.refresh_from_db()
    assert model.sha256 and set(model.tensor_hashes["tensors"]) == {"blk.0.ffn_up.weight", "blk.1.ffn_up.weight"}
    assert model.tensor_hashes["file"]["size"] == model.size


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
