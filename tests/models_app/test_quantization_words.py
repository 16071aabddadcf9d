"""A model's quantization in words on its page and in the API: what a weight is and its bits, from ggml's block
sizes; a K-quant mix by its main type; a name ggml has no type for, as it is."""

import pytest

from models_app.gguf.quantization import described


@pytest.mark.parametrize(("file_type", "words"), [
    ("TQ2_0", "TQ2_0 (ternary: each weight is −1, 0 or +1; 2.06 bits per weight)"),
    ("TQ1_0", "TQ1_0 (ternary: each weight is −1, 0 or +1; 1.69 bits per weight)"),
    ("Q4_0", "Q4_0 (4.50 bits per weight)"),
    ("Q4_1", "Q4_1 (5.00 bits per weight)"),
    ("Q4_K_M", "Q4_K_M (mostly Q4_K, 4.50 bits per weight; some tensors kept finer)"),
    ("F16", "F16 (16.00 bits per weight)"),
    ("ALL_F32", "ALL_F32 (32.00 bits per weight)"),
    ("unknown", "unknown"),
    ("type 99", "type 99"),
])
def test_it_names_each_type_with_its_bits_per_weight(file_type, words):
    assert described(file_type) == words
