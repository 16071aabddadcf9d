"""A model file's quantization in words a user understands: the type's name, what a weight is, and its bits.

The name is the file's own (`general.file_type`, as gguf_meta reads it); the bits come from ggml's block sizes as
the `gguf` package lists them (TQ2_0: 66 bytes for 256 weights, 2.06 bits each). A K-quant mix (Q4_K_M) names
its main type; a name ggml has no type for is shown as it is.
"""

import re

import gguf

# BitNet b1.58-style models: weights trained to -1, 0 or +1, stored by llama.cpp's ternary types.
TERNARY = {"TQ1_0", "TQ2_0"}
K_MIX = re.compile(r"^(Q[2-6]_K)_[SML]$")


def bits_per_weight(type_name: str) -> float | None:
    kind = getattr(gguf.GGMLQuantizationType, type_name, None)
    if kind is None:
        return None
    block, size = gguf.GGML_QUANT_SIZES[kind]
    return 8 * size / block


def described(file_type: str) -> str:
    """E.g. "TQ2_0 (ternary: each weight is −1, 0 or +1; 2.06 bits per weight)"."""
    mix = K_MIX.match(file_type)
    bits = bits_per_weight(mix.group(1) if mix else file_type.removeprefix("ALL_"))
    if bits is None:
        return file_type
    if file_type in TERNARY:
        return f"{file_type} (ternary: each weight is −1, 0 or +1; {bits:.2f} bits per weight)"
    if mix:
        return f"{file_type} (mostly {mix.group(1)}, {bits:.2f} bits per weight; some tensors kept finer)"
    return f"{file_type} ({bits:.2f} bits per weight)"
