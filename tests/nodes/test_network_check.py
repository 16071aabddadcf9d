"""Measuring the link to a laptop over plain TCP, and saying what is wrong with it."""


import pytest

from nodes.models import ActionKind, ActionStatus, LinkCheck
from nodes.probing.netcheck import warnings
from tests.nodes.laptops import register, run_now
from tests.services import lan_harness


@pytest.fixture(scope="module")
def slow_lan():
    """One laptop behind a 100 Mbit link, as if a cheap switch sat in the way."""
    harness = lan_harness("slow", "10.234.0.0/24")
    yield harness.up(1, rate="100mbit")
    harness.down()


def test_it_measures_round_trips_and_throughput_both_ways(lan, db):
    the_lan = lan(3)
    node = register(the_lan, the_lan.laptops[2])
    action = run_now(node, ActionKind.NETWORK_CHECK)
    assert action.status == ActionStatus.SUCCEEDED, action.error
    report = LinkCheck.objects.get(node=node).report
    assert 0 < report["rtt_median_ms"] <= report["rtt_p99_ms"]
    assert report["to_laptop_mb_s"] > 50 and report["from_laptop_mb_s"] > 50


def test_it_warns_about_a_slow_link_that_claims_to_be_gigabit(slow_lan, db):
    node = register(slow_lan, slow_lan.laptops[0])
    action = run_now(node, ActionKind.NETWORK_CHECK)
    assert action.status == ActionStatus.SUCCEEDED, action.error
    check = LinkCheck.objects.get(node=node)
    assert 8 < check.report["to_laptop_mb_s"] < 14, "100 Mbit/s is 12.5 MB/s"
    assert 8 < check.report["from_laptop_mb_s"] < 14
    assert any("says it is gigabit" in warning for warning in check.warnings)


def test_it_warns_about_slow_round_trips_and_wifi():
    report = {"rtt_median_ms": 2.5, "rtt_p99_ms": 9.0, "to_laptop_mb_s": 110, "from_laptop_mb_s": 110}
    found = warnings(report, {"wireless": True, "link_speed_mbps": 1000})
    assert any("2.50 ms" in warning for warning in found)
    assert any("Wi-Fi" in warning for warning in found)
    assert not any("gigabit" in warning for warning in found)
