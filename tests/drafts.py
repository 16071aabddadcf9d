"""Draft models made from the bundled model for tests: a cut (its first layers, scripts/cut_draft.py), and a
copy whose vocabulary differs in one token, which no model may draft with."""

from pathlib import Path

import gguf

from models_app.library.bundled import bundled_model_path
from scripts.cut_draft import cut

CUT_LAYERS = 20  # of its 30: enough that the draft guesses some of the answer


def cut_draft(folder: Path, layers: int = CUT_LAYERS) -> Path:
    target = folder / f"draft-{layers}.gguf"
    if not target.exists():
        cut(bundled_model_path(), target, layers)
    return target


def other_vocabulary(folder: Path, token: int = 1000) -> Path:
    """The bundled model, its token `token` spelled otherwise: as many tokens, not the same ones."""
    target = folder / "other-vocabulary.gguf"
    if target.exists():
        return target
    reader = gguf.GGUFReader(bundled_model_path())
    writer = gguf.GGUFWriter(target, reader.fields[gguf.Keys.General.ARCHITECTURE].contents())
    for field in reader.fields.values():
        if field.name == gguf.Keys.General.ARCHITECTURE or field.name.startswith("GGUF."):
            continue
        value = field.contents()
        if field.name == gguf.Keys.Tokenizer.LIST:
            value[token] = "\u00a7\u00a7unlike\u00a7\u00a7"
        kind = field.types[0]
        writer.add_key_value(field.name, value, kind, sub_type=field.types[-1] if kind == gguf.GGUFValueType.ARRAY
                             else None)
    for tensor in reader.tensors:
        writer.add_tensor_info(tensor.name, tensor.data.shape, tensor.data.dtype, tensor.data.nbytes,
                               tensor.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for tensor in reader.tensors:
        writer.write_tensor_data(tensor.data)
    writer.close()
    return target
