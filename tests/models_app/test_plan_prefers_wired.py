"""Of laptops alike, the wired ones take the pipeline's busy stages; a Wi-Fi laptop gets what they cannot hold."""

from models_app.planning import words as plan_words
from models_app.planning.planner import GiB, Machine, MiB, plan_fastest
from models_app.planning.records import as_record
from tests.models_app.test_planner import SHAPE, SMALL

HEAD = Machine("head", 200 * MiB, 10.0)  # the embedding and little more: the laptops hold the layers


def laptop(name: str, memory: int, wifi: bool, speed: float = 10.0) -> Machine:
    return Machine(name, memory, speed, 0.001, wifi=wifi)


def layers_of(plan) -> dict[str, int]:
    return {stage.machine.name: stage.count for stage in plan.stages[1:]}


def test_it_gives_a_wifi_laptop_only_what_the_wired_one_cannot_hold():
    for listed in ("wifi first", "wired first"):  # not the list's order: the link decides
        wifi, wired = laptop("air", 600 * MiB, True), laptop("desk", 600 * MiB, False)
        plan = plan_fastest(SHAPE, HEAD, [wifi, wired] if listed == "wifi first" else [wired, wifi], SMALL)
        held = layers_of(plan)
        assert held["desk"] > held["air"] >= 1, (listed, held)


def test_it_leaves_a_wifi_laptop_out_when_a_wired_one_holds_everything():
    plan = plan_fastest(SHAPE, HEAD, [laptop("air", 2 * GiB, True), laptop("desk", 2 * GiB, False)], SMALL)
    assert list(layers_of(plan)) == ["desk"]


def test_a_much_faster_wifi_laptop_still_takes_the_work():
    plan = plan_fastest(SHAPE, HEAD, [laptop("air", 2 * GiB, True, speed=20.0), laptop("desk", 2 * GiB, False)],
                        SMALL)
    assert list(layers_of(plan)) == ["air"], "preferred, not forbidden"


def test_it_predicts_a_wifi_laptop_at_its_real_speed():
    alike = [laptop("air", 2 * GiB, True, speed=20.0)]
    assert plan_fastest(SHAPE, HEAD, alike, SMALL).seconds_per_token == \
        plan_fastest(SHAPE, HEAD, [laptop("air", 2 * GiB, False, speed=20.0)], SMALL).seconds_per_token


def test_the_plan_says_why_a_wifi_laptop_holds_less():
    plan = plan_fastest(SHAPE, HEAD, [laptop("air", 600 * MiB, True), laptop("desk", 600 * MiB, False)], SMALL)
    note = next(note for note in as_record(plan)["notes"] if note.startswith("On Wi-Fi"))
    assert note.startswith("On Wi-Fi: air. The plan counts a Wi-Fi laptop 10 % slower than it is")
    assert plan_words.on_wifi([]) == ""
