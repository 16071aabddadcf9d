"""Turning a laptop's raw /proc readings into samples."""

from nodes.metrics.sampler import Sampler

FIRST = """T 1000.0
cpu  100 0 100 800 0 0 0 0 0 0
cpu0 50 0 50 400 0 0 0 0 0 0
cpu1 50 0 50 400 0 0 0 0 0 0
MemTotal:       8000000 kB
MemAvailable:   6000000 kB
SwapTotal:      1000000 kB
SwapFree:        900000 kB
Net 1000 2000
MHz 2400
E"""
SECOND = """T 1002.0
cpu  250 0 150 900 0 0 0 0 0 0
cpu0 150 0 100 450 0 0 0 0 0 0
cpu1 100 0 50 450 0 0 0 0 0 0
MemTotal:       8000000 kB
MemAvailable:   5000000 kB
SwapTotal:      1000000 kB
SwapFree:        900000 kB
CgLimit 4096000000 1024000000
Net 5000 2400
MHz 2800
Temp 61000
E"""


def feed(sampler: Sampler, text: str) -> dict | None:
    result = None
    for line in text.splitlines():
        result = sampler.feed(line) or result
    return result


def test_it_needs_two_readings_to_make_a_rate():
    assert feed(Sampler(), FIRST) is None


def test_it_turns_counters_into_percentages_and_rates():
    sampler = Sampler()
    feed(sampler, FIRST)
    sample = feed(sampler, SECOND)
    assert sample["t"] == 1002.0
    assert sample["cpu"] == 66.7  # 200 busy of 300 jiffies
    assert sample["cores"] == [75.0, 50.0]
    assert (sample["rx"], sample["tx"]) == (2000, 200)  # bytes per second over 2 s
    assert sample["mhz"] == 2800 and sample["temp"] == 61.0


def test_it_counts_a_cgroup_limit_as_the_laptops_memory():
    sampler = Sampler()
    feed(sampler, FIRST)
    sample = feed(sampler, SECOND)
    assert sample["ram_total"] == 4096000000
    assert sample["ram_used"] == 1024000000
    assert sample["swap_used"] == 100000 * 1024


def test_it_reads_big_counters_and_skips_a_line_it_cannot_read():
    sampler = Sampler()
    feed(sampler, FIRST.replace("Net 1000 2000", "Net 3213510000 2000"))
    sample = feed(sampler, SECOND.replace("Net 5000 2400", "Net 3.21351e+09 2400").replace("MHz 2800", "MHz ???"))
    assert sample["tx"] == 200 and sample["mhz"] is None
    assert sample["cpu"] == 66.7
