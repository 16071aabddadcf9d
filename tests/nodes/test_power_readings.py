"""A laptop's battery, CPU clock, CPU limit and link read from what sysfs says: nonsense is a clear unknown."""

from nodes.metrics.sampler import Sampler
from nodes.probing import power
from nodes.probing.probe import parse
from tests.nodes.test_sampler import FIRST, SECOND, feed


def test_it_reads_a_battery_in_use():
    assert power.battery("43", "Discharging", "0") == power.Battery("on battery", 43)
    assert power.battery("80\n", "Charging\n", "1").state == "charging"
    assert power.battery("100", "Full", "1").state == "full"


def test_it_asks_the_plug_when_the_battery_does_not_say():
    assert power.battery("43", "", "0").state == "on battery"
    assert power.battery("43", "Unknown", "1").state == "on AC"


def test_it_calls_a_charge_that_is_no_percent_unknown_and_says_why():
    for nonsense in ("abc", "250", "-5", "4 3", "²"):  # "²" is a digit to str.isdigit(), not to int()
        found = power.battery(nonsense, "Discharging", "0")
        assert found.percent is None and found.state == "on battery"
        assert nonsense in found.note and "not a percent from 0 to 100" in found.note


def test_it_calls_a_state_nobody_reports_unknown_and_says_why():
    found = power.battery("43", "", "")
    assert found.state is None and found.percent == 43
    assert found.note == "the battery does not say whether it charges, and no plug is reported"
    assert "'Exploding'" in power.battery("43", "Exploding", "").note


def test_the_probe_keeps_nonsense_out_of_its_facts():
    facts = parse({"battery": "1", "battery_percent": "abc", "battery_status": "", "on_ac": ""})
    assert facts["battery_percent"] is None and facts["battery_state"] is None
    assert "'abc'" in facts["battery_note"]
    assert parse({})["battery_state"] is None and parse({})["battery_note"] == "", "no battery: nothing to say"


def test_the_probe_reads_the_link_kind_the_cpu_clock_and_a_cgroup_limit():
    facts = parse({"nic": "wlp2s0", "wireless": "1", "cpu_khz_now": "1200000", "cpu_khz_max": "3400000",
                   "cpu_quota": "30000 100000", "cpu_periods": "200 150"})
    assert facts["link_kind"] == "wifi"
    assert (facts["cpu_khz_now"], facts["cpu_khz_max"]) == (1200000, 3400000)
    assert facts["cpu_quota_cores"] == 0.3 and facts["cpu_throttled_share"] == 0.75
    unlimited = parse({"nic": "eth0", "wireless": "0", "cpu_quota": "-1 100000", "cpu_periods": "0 0"})
    assert unlimited["link_kind"] == "wired"
    assert unlimited["cpu_quota_cores"] is None and unlimited["cpu_throttled_share"] is None
    assert parse({"cpu_quota": "max 100000"})["cpu_quota_cores"] is None


def test_the_samples_carry_the_battery_the_clock_and_the_share_of_time_throttled():
    sampler = Sampler()
    feed(sampler, FIRST.replace("E", "Thr 1000000000\nFreq 3000000 3400000\nBat 44|Discharging|0\nE"))
    sample = feed(sampler, SECOND.replace("E", "Thr 2200000000\nFreq 1200000 3400000\nBat 43|Discharging|0\nE"))
    assert sample["battery"] == {"state": "on battery", "percent": 43, "note": ""}
    assert sample["throttled"] == 0.6, "1.2 s held back of 2 s"
    assert (sample["cpu_khz"], sample["cpu_khz_max"]) == (1200000, 3400000)


def test_a_sample_of_a_laptop_without_those_readings_says_none():
    sampler = Sampler()
    feed(sampler, FIRST)
    sample = feed(sampler, SECOND.replace("E", "Bat abc||\nFreq \nE"))
    assert sample["throttled"] is None and sample["cpu_khz"] is None
    assert sample["battery"]["percent"] is None and "'abc'" in sample["battery"]["note"]


def test_a_clock_the_laptop_does_not_say_is_unknown_not_its_top():
    sampler = Sampler()
    feed(sampler, FIRST)
    sample = feed(sampler, SECOND.replace("E", "Freq - 3400000\nThr ²\nE"))
    assert (sample["cpu_khz"], sample["cpu_khz_max"]) == (None, 3400000)
    assert parse({"battery_percent": "²", "userland_bits": "32"})["userland_bits"] == 32


def test_it_flags_a_laptop_on_battery_throttled_and_on_wifi():
    facts = {"battery_state": "on battery", "battery_percent": 43, "link_kind": "wifi", "rtt_ms": 0.8}
    texts = [flag["text"] for flag in power.flags(facts, {"throttled": 0.6})]
    assert texts == ["on battery 43%", "throttled 60% of the time", "Wi-Fi, 0.8 ms round trip"]
    assert power.flags(facts, None, rtt_ms=3.14)[-1]["text"] == "Wi-Fi, 3.1 ms round trip", "a network check knows"


def test_it_flags_a_busy_cpu_held_below_its_clock_but_not_an_idle_one():
    busy = {"cpu": 95.0, "cpu_khz": 1200000, "cpu_khz_max": 3400000, "throttled": None}
    assert [flag["text"] for flag in power.flags({}, busy)] == ["CPU at 1.2 of 3.4 GHz"]
    assert power.flags({}, {**busy, "cpu": 3.0}) == [], "an idle CPU clocks down by design"


def test_it_flags_nothing_on_a_wired_laptop_on_ac():
    assert power.flags({"battery_state": "on AC", "link_kind": "wired"}, {"throttled": 0.0}) == []
    assert power.flags(None) == []
