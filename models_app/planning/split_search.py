"""The fastest split of a model's units over laptops and their devices: pure numbers, no model shapes.

Units are the model's blocks, then its output layer. A laptop's rpc-server serves the devices the plan uses in
one order (its GPUs, then its CPU); each device holds a contiguous run, maybe none, and a laptop in the
pipeline holds one unit at least. The planner (models_app/planning/planner.py) turns models and options into the
running byte sums this module works on.
"""

from collections import deque
from dataclasses import dataclass
from itertools import permutations

INF = float("inf")
# A laptop's second device in the pipeline costs two round trips per token, not four: the head still sends the
# graph and reads the result, but the activations pass from one device to the next inside the laptop.
SECOND_DEVICE_HOP = 0.5
# A laptop on Wi-Fi is searched as if this much slower, so that of laptops alike the wired ones take the busy
# stages: a wireless link's delay varies and it drops more often than a cable, and one laptop's drop stops the
# whole pipeline. The plan's predicted times still use its real speed.
WIFI_PREFERENCE = 0.9
KEPT, FROM_UNUSED, FROM_USED = 0, 1, 2  # how a device's pass reached an end: holding nothing, first, after another


@dataclass(frozen=True)
class Machine:
    """One device as the planner sees it. `name` is the laptop's ("head" for the panel's own machine); a laptop
    with several devices is several Machines of the same name, one after another, in the order its rpc-server
    serves them (GPUs first, the CPU last)."""
    name: str
    usable_bytes: int
    bandwidth_gb_s: float  # effective memory bandwidth
    hop_s: float = 0.0  # network cost per token of reaching the laptop (0 for the head)
    device: str = "CPU"  # as ggml names it: CPU, Vulkan0, CUDA0, MTL0
    description: str = ""  # as the driver describes it ("llvmpipe (LLVM 15.0.6, 256 bits)"), for words
    measured: bool = True  # False: bandwidth_gb_s is a default, not a measurement
    wifi: bool = False  # its laptop reaches the LAN over Wi-Fi

    @property
    def search_rate(self) -> float:
        """Bytes per second the search counts it at (a Wi-Fi laptop's less: WIFI_PREFERENCE)."""
        return self.bandwidth_gb_s * 1e9 * (WIFI_PREFERENCE if self.wifi else 1.0)


def laptop_groups(machines: list[Machine]) -> list[tuple[int, ...]]:
    """Indices of each laptop's devices: runs of consecutive machines with the same name."""
    groups: list[list[int]] = []
    for index, machine in enumerate(machines):
        if groups and machines[groups[-1][0]].name == machine.name:
            groups[-1].append(index)
        else:
            groups.append([index])
    return [tuple(group) for group in groups]


class Search:
    """The fastest split for many orderings of laptops at once. A device's time and memory are sums over its units
    plus a constant, so for each end point the best start is the cheapest in a window of starts that fit, and a
    window's minimum slides along in one pass: O(units) per device, not O(units²) stage sums. Orderings that
    share a prefix share its rows (every prefix of the fastest laptops is one pass per device).

    A laptop's devices are passed in turn over two rows: the best times with the laptop holding nothing yet, and
    with it holding something; a device either holds nothing (the second row stays) or a run starting from
    either row (a first device pays the laptop's hop, a later one SECOND_DEVICE_HOP of it). A laptop of one device
    is exactly one pass from the first row."""

    def __init__(self, laptops: list[Machine], held: list[int], read: list[int], fixed: int,
                 head_row: list[float] | None = None) -> None:
        """`held`, `read`: running sums over the units of bytes held and bytes one token reads; `fixed`: what a
        device holding units needs besides (its server, its working memory); `head_row`: the seconds for the head
        holding 0, 1, … units."""
        self.laptops, self.groups, self.total = laptops, laptop_groups(laptops), len(held) - 1
        self.held, self.read, self.fixed = held, read, fixed
        self.rows: dict[tuple[int, ...], tuple[list[float], list]] = {(): (head_row or [], [])}

    def devices(self, order: tuple[int, ...]) -> list[Machine]:
        return [self.laptops[index] for laptop in order for index in self.groups[laptop]]

    def row(self, order: tuple[int, ...]) -> list[float]:
        """Least seconds with units 0..e−1 placed on the head then the laptops of `order`, each holding one at least."""
        if order not in self.rows:
            self.rows[order] = self.laptop_row(self.row(order[:-1]), self.groups[order[-1]])
        return self.rows[order][0]

    def laptop_row(self, before: list[float], group: tuple[int, ...]) -> tuple[list[float], list]:
        holding, trail = None, []
        for index in group:
            holding, start, source = self.device_pass(before, holding, self.laptops[index])
            trail.append((start, source))
        return holding, trail

    def device_pass(self, unused: list[float], holding: list[float] | None, machine: Machine):
        """One device's pass: the new "holding" row, the start each end chose, and from which row (None: all
        from `unused`, the laptop's first device)."""
        if holding is None:
            return *self.slide(unused, machine), None
        cheaper = machine.hop_s * SECOND_DEVICE_HOP - machine.hop_s  # slide adds the whole hop
        before = [min(a, b + cheaper) for a, b in zip(unused, holding, strict=True)]
        after = [FROM_USED if b + cheaper < a else FROM_UNUSED for a, b in zip(unused, holding, strict=True)]
        row, start = self.slide(before, machine)
        source = [KEPT if kept <= new else after[begin] for kept, new, begin in zip(holding, row, start, strict=True)]
        return [min(kept, new) for kept, new in zip(holding, row, strict=True)], start, source

    def slide(self, before: list[float], machine: Machine) -> tuple[list[float], list[int]]:
        """Least seconds with the device holding units s..e−1 after `before[s]`, for every end e, and that s."""
        rate, room = machine.search_rate, machine.usable_bytes - self.fixed
        held, read = self.held, self.read
        row, start, window, lo = [INF] * (self.total + 1), [0] * (self.total + 1), deque(), 0
        for end in range(1, self.total + 1):
            value = before[end - 1] - read[end - 1] / rate
            while window and window[-1][0] >= value:
                window.pop()
            window.append((value, end - 1))
            while lo < end and held[end] - held[lo] > room:
                lo += 1
            while window and window[0][1] < lo:
                window.popleft()
            if window and window[0][0] < INF:
                row[end], start[end] = window[0][0] + read[end] / rate + machine.hop_s, window[0][1]
        return row, start

    def counts(self, order: tuple[int, ...]) -> list[int]:
        """The head's units, then each device's of `order` (0 for a device left idle), read back along the passes."""
        counts, end = [], self.total
        for size in range(len(order), 0, -1):
            split, end = read_back(self.rows[order[:size]][1], end)
            counts[:0] = split
        return [end, *counts]

    def fill(self, laptop: int, first: int, count: int) -> list[int] | None:
        """The fastest way for one laptop's devices to hold units first..first+count−1 (None: they cannot)."""
        before = [INF] * (self.total + 1)
        before[first] = 0.0
        row, trail = self.laptop_row(before, self.groups[laptop])
        return None if row[first + count] == INF else read_back(trail, first + count)[0]


def read_back(trail: list, end: int) -> tuple[list[int], int]:
    """A laptop's units per device, in serving order, for the passes in `trail` ending at `end`; and where the
    laptop's first unit is."""
    counts, holding = [], True
    for start, source in reversed(trail):
        how = FROM_UNUSED if source is None else source[end]
        if not holding or how == KEPT:
            counts.append(0)
            continue
        counts.append(end - start[end])
        end, holding = start[end], how == FROM_USED
    return counts[::-1], end


def orderings(laptops: list[Machine], exhaustive_up_to: int = 5, most: int | None = None):
    """Laptop indices (into `laptop_groups(laptops)`): every subset in every order for a few laptops; for more,
    subsets of the fastest, in their order and roomiest last (it holds the output). Never more than `most`
    laptops. A laptop's speed is its fastest device's; its room, all its devices'."""
    groups = laptop_groups(laptops)
    most = len(groups) if most is None else min(len(groups), most)
    if len(groups) <= exhaustive_up_to:
        for size in range(0, most + 1):
            yield from permutations(range(len(groups)), size)
        return
    speed = [max(laptops[i].search_rate for i in group) for group in groups]
    room = [sum(laptops[i].usable_bytes for i in group) for group in groups]
    # Among laptops alike in speed, the nearest first (a hop costs every token), then the roomiest: the list
    # order alone decided it before, and a plan then changed when laptops were listed in another order.
    fastest = sorted(range(len(groups)), key=lambda g: (-speed[g], laptops[groups[g][0]].hop_s, -room[g]))
    for size in range(0, most + 1):
        chosen = fastest[:size]
        yield tuple(chosen)
        yield tuple(sorted(chosen, key=lambda g: room[g]))
