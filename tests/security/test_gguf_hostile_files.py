"""Issue 12, items 1 and 2: GGUF headers that claim too much, through both doors.

A header is read within a memory and time budget whatever it claims; a file whose block_count or numbers
do not hold up against its tensors is refused in one sentence, and the refusal leaves nothing behind:
no model row, no upload row, no part file, no file in the models folder.
"""

import pytest

from models_app.gguf import reader as gguf_reader
from models_app.models import GgufModel
from tests.conftest import PASSWORD
from tests.models_app.uploading import assert_nothing_left
from tests.security import doors
from tests.security.gguf_files import T, with_big_array, with_empty_strings, write_model

CHUNK = 1 << 20

HOSTILE = {
    "a 2.3 KB file claiming 16,777,216 layers": {"{arch}.block_count": (1 << 24, T.UINT32)},
    "block_count as a float": {"{arch}.block_count": (4.0, T.FLOAT32)},
    "block_count of 2^40": {"{arch}.block_count": (1 << 40, T.UINT64)},
    "block_count as text": {"{arch}.block_count": ("4", T.STRING)},
    "context_length of 2^64-1": {"{arch}.context_length": ((1 << 64) - 1, T.UINT64)},
    "a negative head count": {"{arch}.attention.head_count": (-4, T.INT32)},
    "an embedding width of 2^31": {"{arch}.embedding_length": (1 << 31, T.UINT32)},
    "an architecture that is a number": {"general.architecture": (5, T.UINT32)},
}
LAYERS = {
    "layer 2 without tensors": [0, 1, 3],
    "a tensor for layer 7 of 4": [0, 1, 2, 3, 7],
    "a tensor for layer 2^40 of 4": [0, 1, 2, 3, 1 << 40],
}


@pytest.fixture
def admin(client, alice, settings, transactional_db):
    doors.empty_model_folders()
    settings.UPLOAD_CHUNK_BYTES = CHUNK
    client.login(username="alice", password=PASSWORD)
    return client


@pytest.fixture(scope="module")
def command_baseline(tmp_path_factory) -> doors.Door:
    """The command refusing a file that is not GGUF at all: what Django alone costs, to compare with."""
    not_gguf = tmp_path_factory.mktemp("baseline") / "not.gguf"
    not_gguf.write_bytes(b"PK\x03\x04 not a model")
    return doors.addmodel(not_gguf)


def assert_refused_by_both(admin, path, command_baseline) -> None:
    command = doors.addmodel(path)
    assert command.refused, command.message
    doors.assert_one_sentence(command)
    assert command.message.startswith("CommandError: ") and path.name in command.message, command.message
    assert_within_budget_command(command, command_baseline)
    assert not GgufModel.objects.exists()
    browser = doors.upload(admin, path, CHUNK)
    assert browser.refused, browser.message
    doors.assert_one_sentence(browser)
    assert_within_budget_upload(browser)
    assert_nothing_left()


def assert_within_budget_command(door: doors.Door, baseline: doors.Door) -> None:
    assert door.peak_bytes <= baseline.peak_bytes + doors.MEMORY_BUDGET, \
        f"addmodel peaked at {door.peak_bytes >> 20} MiB, {baseline.peak_bytes >> 20} MiB without a model"
    assert door.seconds <= baseline.seconds + doors.COMMAND_BUDGET_S, f"{door.seconds:.1f} s, {baseline.seconds:.1f} s"


def assert_within_budget_upload(door: doors.Door) -> None:
    assert door.peak_bytes <= doors.MEMORY_BUDGET, f"the web process grew by {door.peak_bytes / doors.MIB:.0f} MiB"
    assert door.seconds <= doors.UPLOAD_BUDGET_S, f"the upload took {door.seconds:.1f} s"
    assert door.reads, "the header was read by the bounded reader"
    for seconds, peak_mib in door.reads:
        assert seconds <= doors.READ_BUDGET_S and peak_mib <= doors.MEMORY_BUDGET / doors.MIB, (seconds, peak_mib)


@pytest.mark.parametrize("values", HOSTILE.values(), ids=HOSTILE.keys())
def test_it_refuses_numbers_that_do_not_hold_up_at_both_doors(admin, tmp_path, command_baseline, values):
    assert_refused_by_both(admin, write_model(tmp_path / "hostile.gguf", values=values), command_baseline)


@pytest.mark.parametrize("tensor_layers", LAYERS.values(), ids=LAYERS.keys())
def test_it_refuses_layers_that_the_tensors_do_not_match_at_both_doors(admin, tmp_path, command_baseline,
                                                                       tensor_layers):
    path = write_model(tmp_path / "hostile.gguf", layers=4, tensor_layers=tensor_layers)
    assert_refused_by_both(admin, path, command_baseline)


def test_it_keeps_a_refusal_to_one_line_whatever_the_names_in_the_file(admin, tmp_path, command_baseline):
    path = write_model(tmp_path / "hostile.gguf", more_tensors=("blk.7.x\na second line",))
    assert_refused_by_both(admin, path, command_baseline)


def test_it_reads_a_2_mb_metadata_array_within_budget_at_both_doors(admin, tmp_path, command_baseline):
    """The issue's file: one array of 2,000,000 uint8 took 21-39 s and 1.5 GB. Nothing is wrong with it
    otherwise (llama.cpp loads it), so it is added, cheaply."""
    path = with_big_array(tmp_path / "array.gguf", 2_000_001)
    command = doors.addmodel(path, name="by-command")
    assert not command.refused, command.message
    assert_within_budget_command(command, command_baseline)
    browser = doors.upload(admin, path, CHUNK, name="by-upload")
    assert not browser.refused, browser.message
    assert_within_budget_upload(browser)
    assert sorted(GgufModel.objects.values_list("name", "n_layer")) == [("by-command", 4), ("by-upload", 4)]


@pytest.mark.parametrize("header_mib", [24, 31, 40])
def test_it_holds_headers_built_to_exhaust_the_reader_to_its_limits(admin, tmp_path, header_mib):
    """Empty strings cost llama.cpp's reader the most per byte (about 9 times): 24 MiB of them fit its
    256 MiB, 31 MiB do not (its child ends and the file is refused), and past 32 MiB the header is not read
    at all. Every read ends within its time, and none of it lands in the panel's processes."""
    path = with_empty_strings(tmp_path / "strings.gguf", header_mib)
    command = doors.addmodel_here(path)
    browser = doors.upload(admin, path, CHUNK)
    assert command.refused == browser.refused == (header_mib > 24), (command.message, browser.message)
    for door in (command, browser):
        assert door.peak_bytes <= doors.MEMORY_BUDGET, f"the panel's process grew by {door.peak_bytes >> 20} MiB"
        for seconds, peak_mib in door.reads:
            assert seconds <= doors.READ_BUDGET_S and peak_mib <= gguf_reader.MEMORY_LIMIT >> 20, (seconds, peak_mib)
    if browser.refused:
        doors.assert_one_sentence(command)
        doors.assert_one_sentence(browser)
        assert_nothing_left()
