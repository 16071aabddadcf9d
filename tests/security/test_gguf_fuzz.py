"""Issue 12: a real header, mutated, through both doors, within budget every time.

The file starts as the bundled SmolLM2's header (every key, its 49k-token tokenizer) over tiny tensors.
Hypothesis rewrites its counts, lengths, types, dimensions, offsets and values (block_count among them)
with extremes or any 64-bit number, flips bytes, or cuts the file short. Each result goes through
`addmodel` and the browser's upload: both must take it or both refuse it in one sentence, leaving nothing
behind, and every header read stays within 100 MiB and 2 s (the reader's own report of its child), as does
the growth of this process, which holds both doors.
"""

import os
import tempfile
from functools import lru_cache

import gguf
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from models_app.models import GgufModel, Upload
from tests.conftest import PASSWORD
from tests.models_app.uploading import assert_nothing_left
from tests.security import doors
from tests.security.gguf_files import real_header_model

CHUNK = 1 << 20
EXAMPLES = int(os.environ.get("GGUF_FUZZ_EXAMPLES", "100"))  # 0.1-0.5 s each on a shared 2-core machine
PARTS_PER_FIELD = 6  # a field's own counts, types and lengths come first; the tokenizer's 49k strings after
EXTREMES = [*range(14), 31, 32, 33, 63, 64, 255, 256, 511, 512, 513, 1 << 16, (1 << 24) + 1, 1 << 30, (1 << 31) - 1,
            1 << 31, (1 << 32) - 1, 1 << 32, 1 << 40, (1 << 62) + 7, (1 << 63) - 1, 1 << 63, (1 << 64) - 1]


@lru_cache(maxsize=1)
def numbers_in_header() -> tuple[tuple[int, int], ...]:
    """(offset, width) of every count, length, type, dimension, offset and number in the header."""
    data = real_header_model()
    with tempfile.NamedTemporaryFile(suffix=".gguf") as copy:
        copy.write(data)
        copy.flush()
        reader = gguf.GGUFReader(copy.name)
        fields = [f for f in reader.fields.values() if not f.name.startswith("GGUF.")]
        fields += [tensor.field for tensor in reader.tensors]
        found = [(4, 4), (8, 8), (16, 8)]  # version, tensor count, key count
        for item in fields:
            found += numbers_in_field(item)
    return tuple(found)


def numbers_in_field(item: gguf.ReaderField) -> list[tuple[int, int]]:
    found, offset = [], item.offset
    for part in item.parts[:PARTS_PER_FIELD]:
        if part.dtype.itemsize in (4, 8) and part.size <= 4:  # a dims array holds up to 4
            found += [(offset + i * part.dtype.itemsize, part.dtype.itemsize) for i in range(part.size)]
        offset += part.nbytes
    return found


def mutations():
    number = st.tuples(st.just("number"), st.sampled_from(numbers_in_header()),
                       st.one_of(st.sampled_from(EXTREMES), st.integers(0, (1 << 64) - 1)))
    size = len(real_header_model())
    anywhere = st.one_of(st.integers(0, 64 << 10), st.integers(0, size - 1))  # the keys come first
    byte = st.tuples(st.just("byte"), anywhere, st.integers(0, 255))
    cut = st.tuples(st.just("cut"), st.integers(0, size - 1), st.none())
    return st.lists(st.one_of(number, number, number, byte, cut), min_size=1, max_size=3)


def mutated(data: bytes, changes: list) -> bytes:
    out = bytearray(data)
    for kind, where, what in changes:
        if kind == "number" and where[0] + where[1] <= len(out):
            offset, width = where
            out[offset:offset + width] = (what % (1 << (8 * width))).to_bytes(width, "little")
        elif kind == "byte" and where < len(out):
            out[where] = what
        elif kind == "cut":
            del out[where:]
    return bytes(out)


@pytest.fixture
def admin(client, alice, settings):
    settings.UPLOAD_CHUNK_BYTES = CHUNK
    client.login(username="alice", password=PASSWORD)
    return client


def assert_within_budget(door: doors.Door, door_seconds: float) -> None:
    assert door.peak_bytes <= doors.MEMORY_BUDGET, f"this process grew by {door.peak_bytes >> 20} MiB"
    assert door.seconds <= door_seconds, f"{door.seconds:.1f} s"
    for seconds, peak_mib in door.reads:
        assert seconds <= doors.READ_BUDGET_S and peak_mib <= doors.MEMORY_BUDGET / doors.MIB, (seconds, peak_mib)


@settings(max_examples=EXAMPLES, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(changes=mutations())
def test_it_holds_every_mutated_real_header_to_the_budget_at_both_doors(admin, tmp_path, changes):
    forget_earlier_examples()
    path = tmp_path / "fuzzed.gguf"
    path.write_bytes(mutated(real_header_model(), changes))
    by_command = doors.addmodel_here(path)
    assert_within_budget(by_command, 2 * doors.READ_BUDGET_S)
    if by_command.refused:
        assert not GgufModel.objects.exists()
    by_upload = doors.upload(admin, path, CHUNK)
    assert_within_budget(by_upload, doors.UPLOAD_BUDGET_S)
    assert by_command.refused == by_upload.refused, (by_command.message, by_upload.message)
    if by_command.refused:
        doors.assert_one_sentence(by_command)
        doors.assert_one_sentence(by_upload)
        assert_nothing_left()


def forget_earlier_examples() -> None:
    """Examples share the test's database and folders; one that failed half-way must not fail the next."""
    GgufModel.objects.all().delete()
    Upload.objects.all().delete()
    doors.empty_model_folders()
