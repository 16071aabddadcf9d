"""A plan in words: each machine's run of layers (llama.cpp's output layer named), the modes table's line
(names while few, a summary past eight), and the bottleneck with its share of a token's time."""

from models_app.planning.words import bottleneck, layers, split_rows, spread


def stage(machine: str, first: int, count: int, seconds: float = 0.001) -> dict:
    return {"machine": machine, "first": first, "count": count, "seconds": seconds,
            "layers": layers(first, count, 80)}


def test_it_names_each_run_of_layers():
    assert layers(0, 2, 80) == "layers 0–1"
    assert layers(7, 1, 80) == "layer 7"
    assert layers(78, 3, 80) == "layers 78–79 and the output layer"
    assert layers(79, 2, 80) == "layer 79 and the output layer"
    assert layers(80, 1, 80) == "the output layer"
    assert layers(0, 0, 80) == "no layers"


def test_it_lists_a_few_machines_and_sums_up_many():
    few = {"stages": [stage("head", 0, 0), stage("lab-3", 0, 40), stage("lab-1", 40, 41)]}
    assert spread(few) == "lab-3 40 · lab-1 41"
    many = {"stages": [stage("head", 0, 3), *(stage(f"hid5-{n}", 3 + 2 * n, 2 + n % 2) for n in range(39))]}
    assert spread(many) == "39 laptops, 2–3 layers each; the head 3"


def test_it_says_which_machine_holds_the_pipeline_back_and_how_much():
    record = {"stages": [stage("head", 0, 0, 0.002), stage("hid5-1", 0, 40, 0.010), stage("hid5-17", 40, 41, 0.030)]}
    assert bottleneck(record) == ("The bottleneck is hid5-17, holding layers 40–79 and the output layer: 30.0 ms of "
                                  "the 42.0 ms a token takes (71 %).")
    head_bound = {"stages": [stage("head", 0, 2, 0.05), stage("hid5-1", 2, 79, 0.01)]}
    assert bottleneck(head_bound).startswith("The bottleneck is the panel's machine (the head), holding the token "
                                             "embedding and layers 0–1: 50.0 ms")


def device(machine: str, label: str, first: int, count: int, seconds: float = 0.001) -> dict:
    return {**stage(machine, first, count, seconds), "label": label, "memory": {"weights": 1}, "usable": 2}


def test_it_names_a_device_where_the_laptop_alone_would_not_say_which():
    head = {**stage("head", 0, 0, 0.002), "memory": {"weights": 1}, "usable": 2}
    record = {"stages": [head, device("gpu1", "gpu1's Vulkan0", 0, 40, 0.004),
                         device("gpu1", "gpu1's CPU", 40, 30, 0.030), device("lab-2", "lab-2", 70, 11, 0.010)]}
    assert spread(record) == "gpu1's Vulkan0 40 · gpu1's CPU 30 · lab-2 11"
    assert bottleneck(record).startswith("The bottleneck is gpu1's CPU, holding layers 40–69: 30.0 ms")
    assert [row["machine"] for row in split_rows(record) if row["bottleneck"]] == ["gpu1's CPU"]
    labels = [(f"hid5-{n // 2}", f"hid5-{n // 2}'s {'CPU' if n % 2 else 'Vulkan0'}") for n in range(39)]
    many = {"stages": [stage("head", 0, 0), *(device(*names, 2 * n, 2) for n, names in enumerate(labels))]}
    assert spread(many) == "20 laptops, 39 devices, 2 layers each"
