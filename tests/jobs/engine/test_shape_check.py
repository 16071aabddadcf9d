"""The shape check at load (jobs/engine/shapes.py) on the head is measured once per model file in a process: a
second engine of the same file takes the first's finding; another file, or the same file changed, is measured."""

from types import SimpleNamespace

from jobs.engine import shapes


class Steps:
    """A batcher whose steps llama.cpp refuses: the check finds "not shown to be the same", and counts its tries."""

    def __init__(self, sequences: int) -> None:
        self.sequences, self.tries = [object()] * sequences, 0
        size = 512
        self.batch = SimpleNamespace(token=[0] * size, pos=[0] * size, n_seq_id=[0] * size,
                                     seq_id=[[0] for _ in range(size)], logits=[False] * size, n_tokens=0)
        self.api, self.ctx = SimpleNamespace(llama_decode=self.decode), None

    def decode(self, ctx, batch) -> int:
        self.tries += 1
        return 1

    def forget_all(self) -> None:
        pass


def tokenize(text: bytes) -> list[int]:
    return list(range(len(text.split())))


def test_the_heads_check_is_measured_once_per_model_file(tmp_path, monkeypatch):
    monkeypatch.setattr(shapes, "_ON_THE_HEAD", {})
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF one")
    first, second = Steps(2), Steps(2)
    assert shapes.any_shape_on_the_head(str(model), first, tokenize) is False and first.tries == 1
    assert shapes.any_shape_on_the_head(str(model), second, tokenize) is False and second.tries == 0, \
        "the same file in the same process: its finding is taken"
    one_slot = Steps(1)
    shapes.any_shape_on_the_head(str(model), one_slot, tokenize)
    assert one_slot.tries == 1, "with one sequence the check compares less: measured on its own"
    model.write_bytes(b"GGUF two, rewritten")
    changed = Steps(2)
    shapes.any_shape_on_the_head(str(model), changed, tokenize)
    assert changed.tries == 1, "a file changed since is measured again"
