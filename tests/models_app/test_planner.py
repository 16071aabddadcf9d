"""The layer planner: every layer once, nothing over memory, fastest really fastest."""

from itertools import combinations, pairwise, permutations

from hypothesis import given, settings
from hypothesis import strategies as st

from models_app.planning.fit import explain_no_fit
from models_app.planning.planner import (
    Calibration,
    GiB,
    Machine,
    MiB,
    ModelShape,
    Options,
    build,
    orderings,
    placement,
    plan_fastest,
    plan_mode,
)

SHAPE = ModelShape(layer_bytes=(100 * MiB,) * 8, token_embd_bytes=50 * MiB, output_bytes=40 * MiB,
                   n_embd=1024, n_head=8, n_head_kv=2, vocab_size=32000)
SMALL = Options(ctx=512, n_ubatch=64, calibration=Calibration(server_base=8 * MiB, head_base=8 * MiB))


def machines(draw_sizes):
    return [Machine(f"laptop-{i}", int(mem * GiB), bw, hop) for i, (mem, bw, hop) in enumerate(draw_sizes)]


laptop_specs = st.lists(st.tuples(st.floats(0.05, 1.5), st.floats(2, 40), st.floats(0, 0.002)),
                        min_size=1, max_size=3)
head_specs = st.tuples(st.floats(0.05, 1.0), st.floats(5, 40))
layer_sizes = st.lists(st.integers(20, 160), min_size=2, max_size=6)


def shape_of(sizes):
    return ModelShape(tuple(s * MiB for s in sizes), 30 * MiB, 20 * MiB, 512, 8, 2, 8000)


def check_plan(plan, shape):
    covered = [layer for stage in plan.stages for layer in stage.layers]
    assert covered == list(range(shape.n_layer + 1)), "every layer exactly once, in contiguous runs"
    for stage in plan.stages:
        assert stage.memory.total <= stage.machine.usable_bytes, f"{stage.machine.name} over its memory"
    where = placement(shape.n_layer, plan.n_gpu_layers, plan.tensor_split)
    planned = [-1 if i == 0 else i - 1 for i, stage in enumerate(plan.stages) for _ in stage.layers]
    assert where == planned, "llama.cpp's own rule puts the layers where the plan says"


@settings(max_examples=150, deadline=None)
@given(layer_sizes, head_specs, laptop_specs, st.booleans())
def test_it_assigns_every_layer_once_within_memory(sizes, head_spec, specs, head_may_hold):
    shape, head = shape_of(sizes), Machine("head", int(head_spec[0] * GiB), head_spec[1])
    options = Options(**{**SMALL.__dict__, "head_may_hold_layers": head_may_hold})
    for mode in ("fastest", "memory", "even"):
        plan = plan_mode(mode, shape, head, machines(specs), options)
        if plan:
            check_plan(plan, shape)
            if not head_may_hold:
                assert plan.stages[0].count == 0


@settings(max_examples=150, deadline=None)
@given(layer_sizes, head_specs, laptop_specs)
def test_it_is_never_slower_than_the_other_modes(sizes, head_spec, specs):
    shape, head, laptops = shape_of(sizes), Machine("head", int(head_spec[0] * GiB), head_spec[1]), machines(specs)
    fastest = plan_fastest(shape, head, laptops, SMALL)
    for mode in ("memory", "even"):
        other = plan_mode(mode, shape, head, laptops, SMALL)
        if other:
            assert fastest is not None, f"{mode} found a plan the fastest mode missed"
            assert fastest.seconds_per_token <= other.seconds_per_token + 1e-12


def splits(total, laptops, head_may_hold):
    """Every way to give the head some units (maybe none) and each of `laptops` laptops one at least."""
    for head in range(total + 1 if head_may_hold else 1):
        rest = total - head
        for cuts in combinations(range(1, rest), laptops - 1) if laptops else [()] if rest == 0 else []:
            bounds = (0, *cuts, rest)
            yield [head, *(b - a for a, b in pairwise(bounds))] if laptops else [head]


def best_of(orders, shape, head, laptops, options):
    """Every split of every ordering in `orders` (laptop indices), built and timed one by one."""
    best = None
    for order in orders:
        for counts in splits(shape.n_layer + 1, len(order), options.head_may_hold_layers):
            plan = build("brute", shape, head, [laptops[i] for i in order], counts, options)
            if plan and (best is None or plan.seconds_per_token < best.seconds_per_token):
                best = plan
    return best


def brute_force(shape, head, laptops, options):
    every_order = (order for size in range(len(laptops) + 1) for order in permutations(range(len(laptops)), size))
    return best_of(every_order, shape, head, laptops, options)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(20, 160), min_size=2, max_size=4), head_specs,
       st.lists(st.tuples(st.floats(0.05, 1.0), st.floats(2, 40), st.floats(0, 0.002)), min_size=1, max_size=3))
def test_it_equals_the_best_plan_found_by_brute_force(sizes, head_spec, specs):
    shape, head, laptops = shape_of(sizes), Machine("head", int(head_spec[0] * GiB), head_spec[1]), machines(specs)
    best, found = brute_force(shape, head, laptops, SMALL), plan_fastest(shape, head, laptops, SMALL)
    assert (best is None) == (found is None)
    if best:
        assert abs(found.seconds_per_token - best.seconds_per_token) < 1e-12
        check_plan(found, shape)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(20, 160), min_size=2, max_size=4), head_specs,
       st.lists(st.tuples(st.floats(0.05, 0.6), st.floats(2, 40), st.floats(0, 0.002)), min_size=6, max_size=8),
       st.booleans())
def test_past_every_order_it_is_the_best_of_the_orders_it_considers(sizes, head_spec, specs, head_may_hold):
    """Over six laptops or more it tries a few orders, not all: of every split over those, it finds the best."""
    shape, head, laptops = shape_of(sizes), Machine("head", int(head_spec[0] * GiB), head_spec[1]), machines(specs)
    options = SMALL.with_(head_may_hold_layers=head_may_hold)
    best = best_of(set(orderings(laptops)), shape, head, laptops, options)
    found = plan_fastest(shape, head, laptops, options)
    assert (best is None) == (found is None)
    if best:
        assert abs(found.seconds_per_token - best.seconds_per_token) < 1e-12
        check_plan(found, shape)


def test_it_never_spans_more_laptops_than_llama_cpp_can_hold():
    """Eight laptops, any four of which hold the model: under a limit of three no plan; under four, four."""
    laptops, head = [Machine(f"lab-{i}", 300 * MiB, 10, 0.0001) for i in range(8)], Machine("head", 80 * MiB, 20)
    assert plan_fastest(SHAPE, head, laptops, SMALL.with_(max_laptops=3)) is None
    plan = plan_fastest(SHAPE, head, laptops, SMALL.with_(max_laptops=4))
    assert sum(1 for stage in plan.stages[1:] if stage.count) == 4
    assert max(len(order) for order in orderings(laptops, most=5)) == 5
    assert max(len(order) for order in orderings(laptops[:4], most=2)) == 2, "every order, up to the limit"


def test_it_prefers_fewer_faster_laptops_to_a_memory_proportional_split():
    head = Machine("head", 80 * MiB, 20)  # room for the embedding, not for a layer
    fast = Machine("fast", 2 * GiB, 20, hop_s=0.0005)
    slow = Machine("slow", 4 * GiB, 4, hop_s=0.0005)
    fastest = plan_fastest(SHAPE, head, [fast, slow], SMALL)
    proportional = plan_mode("memory", SHAPE, head, [fast, slow], SMALL)
    assert [s.machine.name for s in fastest.stages if s.count] == ["fast"]
    assert fastest.seconds_per_token < proportional.seconds_per_token
    assert fastest.tensor_split == (9,) and fastest.n_gpu_layers == 9


def test_it_splits_across_laptops_when_one_cannot_hold_the_model():
    head = Machine("head", 100 * MiB, 20)
    laptops = [Machine("a", 500 * MiB, 10, 0.0005), Machine("b", 600 * MiB, 10, 0.0005)]
    plan = plan_fastest(SHAPE, head, laptops, SMALL)
    assert sum(1 for s in plan.stages if s.count) == 2
    check_plan(plan, SHAPE)


def test_it_explains_with_numbers_when_nothing_fits():
    head = Machine("head", 100 * MiB, 20)
    laptops = [Machine("a", 300 * MiB, 10), Machine("b", 300 * MiB, 10)]
    assert plan_fastest(SHAPE, head, laptops, SMALL) is None
    reason = explain_no_fit(SHAPE, head, laptops, SMALL)
    assert reason.needed > reason.usable
    assert "GiB short" in reason.explain() and "0.7 GiB usable" in reason.explain()


def test_it_validates_a_manual_split():
    head, laptops = Machine("head", 2 * GiB, 20), [Machine("a", 2 * GiB, 10), Machine("b", 2 * GiB, 10)]
    assert plan_mode("manual", SHAPE, head, laptops, SMALL, manual=[0, 4, 5]).tensor_split == (4, 5)
    assert plan_mode("manual", SHAPE, head, laptops, SMALL, manual=[0, 4, 4]) is None, "9 layers, output included"
    assert plan_mode("manual", SHAPE, head, laptops, SMALL, manual=[9, 0, 0]) is None, "a chosen laptop gets layers"


def test_it_mirrors_llama_cpps_placement_rule():
    assert placement(4, 5, (2, 3)) == [0, 0, 1, 1, 1]
    assert placement(4, 3, (1, 2)) == [-1, -1, 0, 1, 1]
    assert placement(4, 0, (1,)) == [-1] * 5


def test_past_every_order_the_listing_order_does_not_change_the_plan():
    """Laptops alike in speed, some nearer than others: the nearest are tried first however they are listed."""
    laptops = [Machine(f"lab-{i}", 350 * MiB, 10, 0.0001 * (1 + i % 4)) for i in range(12)]
    head = Machine("head", 80 * MiB, 20)
    listed, reversed_ = (plan_fastest(SHAPE, head, order, SMALL) for order in (laptops, laptops[::-1]))
    assert abs(listed.seconds_per_token - reversed_.seconds_per_token) < 1e-12
    assert {s.machine.hop_s for s in listed.stages[1:] if s.count} == {0.0001}, "the nearest laptops hold the model"
