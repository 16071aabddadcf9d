"""A draft model for speculative decoding cut from a model itself: its first N layers, with its embeddings, its
final norm and its output head, written as a GGUF. It has the model's vocabulary by construction, so it drafts
for it; how often its guesses are kept depends on how much of the answer the first layers already know.

Labs pair a large model with a small one of its family (docs/api.md, "Drafting"); a cut draft is what a lab
without such a pair can try, and what the tests use (a real draft with real weights, made from the bundled
model here, without a second download).

    .venv/bin/python scripts/cut_draft.py SOURCE.gguf TARGET.gguf --layers 8
"""

import argparse
import re
import sys
from pathlib import Path

import gguf

BLOCK = re.compile(r"blk\.(\d+)\.")


class CutError(ValueError):
    pass


def cut(source: Path, target: Path, layers: int) -> int:
    """Write the cut; the bytes of tensors it kept."""
    reader = gguf.GGUFReader(source)
    arch = reader.fields[gguf.Keys.General.ARCHITECTURE].contents()
    count_key = f"{arch}.block_count"
    if count_key not in reader.fields:
        raise CutError(f"{source.name} does not say how many layers it has ({count_key}).")
    n_layer = reader.fields[count_key].contents()
    if not 1 <= layers < n_layer:
        raise CutError(f"{source.name} has {n_layer} layers: a draft keeps 1 to {n_layer - 1} of them, "
                       f"not {layers}.")
    kept = rewrite(reader, target, lambda name, kind, value: (
        layers if name == count_key else
        f"{value} (draft: first {layers} of {n_layer} layers)" if name == gguf.Keys.General.NAME else
        value[:layers] if kind == gguf.GGUFValueType.ARRAY and name.startswith(f"{arch}.") and len(value) == n_layer
        else value),  # a number per layer (heads, feed-forward width, sliding windows) keeps the first ones
        lambda name: (found := BLOCK.match(name)) is None or int(found[1]) < layers)
    return sum(int(tensor.n_bytes) for tensor in kept)


def rewrite(reader, target: Path, value_of, keep=lambda name: True) -> list:
    """Write `reader`'s GGUF to `target` with each metadata value as `value_of(name, kind, value)` says and the
    tensors `keep(name)` takes; those tensors."""
    writer = gguf.GGUFWriter(target, reader.fields[gguf.Keys.General.ARCHITECTURE].contents(),
                             endianess=reader.endianess)
    for field in reader.fields.values():
        if field.name == gguf.Keys.General.ARCHITECTURE or field.name.startswith("GGUF."):
            continue  # the writer writes these itself
        kind = field.types[0]
        writer.add_key_value(field.name, value_of(field.name, kind, field.contents()), kind,
                             sub_type=field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None)
    kept = [tensor for tensor in reader.tensors if keep(tensor.name)]
    for tensor in kept:
        writer.add_tensor_info(tensor.name, tensor.data.shape, tensor.data.dtype, tensor.data.nbytes,
                               tensor.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for tensor in kept:
        writer.write_tensor_data(tensor.data, tensor_endianess=reader.endianess)
    writer.close()
    return kept


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", type=Path)
    parser.add_argument("target", type=Path)
    parser.add_argument("--layers", type=int, required=True, help="how many of the first layers the draft keeps")
    args = parser.parse_args(argv)
    if args.target.exists():
        print(f"{args.target} exists; not overwriting it.", file=sys.stderr)
        return 2
    try:
        size = cut(args.source, args.target, args.layers)
    except CutError as exc:
        args.target.unlink(missing_ok=True)
        print(exc, file=sys.stderr)
        return 2
    print(f"wrote {args.target}: {args.layers} layers, {size / 2**20:.1f} MiB of tensors")
    return 0


if __name__ == "__main__":
    sys.exit(main())
