"""The planner's memory terms against what llama.cpp was measured to keep resident.

The measurements (tests/models_app/fixtures/memory_measurements.json) come from
`bench/memory_calibration.py --write-fixture`: three models of two architectures,
contexts 512 to 4096, split over real ggml-rpc-servers, each given a prompt that
fills its context; and at 512 and 2048 with 4 slots (a KV stream each, all of
it resident: llama.cpp clears the cache when it makes the context). The live
check on simulated laptops is test_memory_on_laptops.py.
"""

import json
from pathlib import Path

import pytest

from bench.memory_calibration import predicted
from models_app.planning.planner import MiB

RUNS = json.loads((Path(__file__).parent / "fixtures" / "memory_measurements.json").read_text())["runs"]


def within_target(prediction: int, measured: int) -> bool:
    return abs(prediction - measured) <= max(0.05 * measured, 32 * MiB)


def test_the_fixture_covers_two_architectures_and_several_contexts():
    assert {run["shape"]["n_ff"] for run in RUNS} >= {1536, 7168, 2048}
    assert {run["ctx"] for run in RUNS} >= {512, 2048}
    assert {run.get("slots", 1) for run in RUNS} >= {1, 4}, "one sequence, and several each in its own KV stream"
    assert all(run["prompt_tokens"] > run["ctx"] * 0.9 for run in RUNS), "each run must fill its context"


@pytest.mark.parametrize("run", RUNS, ids=lambda run: f"{run['model']}-ctx{run['ctx']}-slots{run.get('slots', 1)}")
def test_every_machine_is_predicted_within_five_percent_or_32_mib(run):
    memory = predicted(run)
    measured = [run["head_growth"], *run["servers_rss"]]
    misses = [(i, m.total / MiB, value / MiB) for i, (m, value) in enumerate(zip(memory, measured, strict=True))
              if not within_target(m.total, value)]
    assert not misses, f"(machine, predicted MiB, measured MiB) outside the target: {misses}"


@pytest.mark.parametrize("run", RUNS, ids=lambda run: f"{run['model']}-ctx{run['ctx']}-slots{run.get('slots', 1)}")
def test_weights_and_kv_cache_equal_what_llama_cpp_allocated(run):
    """Not fitted: these come from the file and the shapes, and must match llama.cpp to the MiB."""
    memory = predicted(run)
    for stage, allocated in zip(memory[1:], run["allocated"][1:], strict=True):
        assert abs(stage.weights - allocated["model"]) < MiB
        assert abs(stage.kv_cache - allocated["KV"]) < MiB
    assert abs(memory[0].weights - run["allocated"][0]["model"]) < MiB
