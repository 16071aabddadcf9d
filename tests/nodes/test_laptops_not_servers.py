"""A laptop on battery, held back or on Wi-Fi: its facts flow from the laptop to its page, its 1 Hz samples and the
plan, and a Wi-Fi laptop gets less work than a wired one alike.

Real sshd on simulated laptops; faked only what this machine lacks (nodes/simlan/power.py): a battery in
/sys/class/power_supply, bound over that laptop's own; a Wi-Fi name for its link. The throttling is real: a cgroup
CPU limit holding back a busy loop.
"""

import contextlib

import pytest

from models_app.models import GgufModel
from models_app.planning.records import make_plan
from nodes.metrics import store as metrics
from nodes.metrics.sampler import SCRIPT, Sampler
from nodes.models import ActionKind
from nodes.remote import ssh
from nodes.simlan import power as simpower
from nodes.simlan.lan import run
from tests.nodes.laptops import register, run_now
from tests.rows import client_for
from tests.services import lan_harness

MiB = 2**20


@pytest.fixture(scope="module")
def power_lan():
    """Laptop 1 on battery and Wi-Fi, laptop 2 wired on mains, laptop 3 held to a fifth of a core."""
    harness = lan_harness("power", "10.254.0.0/24")
    lan = harness.up(3)
    try:
        harness.limit(3, lan.laptops[2].sshd_pid, None, 0.2)
        simpower.rename_link(harness, 1, "wlp2s0")
        simpower.set_battery(harness, 1, capacity="43", status="Discharging", on_ac="0", mouse=True)
        yield harness, lan
    finally:
        for i in (1, 2):
            simpower.remove_battery(harness, i)
        harness.down()


@pytest.fixture
def model(db) -> GgufModel:
    """80 layers of 12 MiB: about a gigabyte, more than either laptop below may hold alone."""
    return GgufModel.objects.create(
        name="test-80", path="/nonexistent/test-80.gguf", size=80 * 12 * MiB, status="ready", architecture="llama",
        n_layer=80, n_embd=1024, n_head=16, n_head_kv=4, n_ff=4096, context_length=8192, vocab_size=32000,
        file_type="Q4_0", layer_bytes=[12 * MiB] * 80,
        other_tensors={"token_embd.weight": 20 * MiB, "output.weight": 20 * MiB})


def probed(lan, i: int, **fields):
    node = register(lan, lan.laptops[i - 1])
    metrics.store().delete(metrics.key(node.pk))  # an earlier test's laptop of the same id left its samples
    for name, value in fields.items():
        setattr(node, name, value)
    node.save()
    action = run_now(node, ActionKind.PROBE)
    assert action.status == "succeeded", action.error
    return node, node.probes.first().facts


def samples(node, count: int, until=lambda sample: True) -> list[dict]:
    """The laptop's 1 Hz samples, as the collector reads them, until `count` were taken or one meets `until`."""
    sampler, found = Sampler(), []
    with contextlib.closing(ssh.stream(node.ssh_target(), SCRIPT, "1")) as lines:
        for line in lines:
            sample = sampler.feed(line)
            if sample:
                found.append(sample)
                if len(found) == count or until(sample):
                    return found
    return found


def test_a_laptop_on_battery_says_so_on_its_page_in_its_samples_and_in_the_plan(power_lan, alice, model):
    harness, lan = power_lan
    node, facts = probed(lan, 1)
    assert (facts["battery_state"], facts["battery_percent"], facts["on_ac"]) == ("on battery", 43, False)
    sample = samples(node, 1)[0]
    assert sample["battery"] == {"state": "on battery", "percent": 43, "note": ""}
    simpower.set_battery(harness, 1, capacity="41", status="Discharging", on_ac="0")
    assert samples(node, 1)[0]["battery"]["percent"] == 41, "the samples follow the battery down"
    client = client_for(alice)
    page = client.get(f"/nodes/{node.name}/").content.decode()
    assert 'data-flag="battery"' in page and "on battery 43%" in page
    metrics.append(node.pk, samples(node, 1)[0])
    assert "on battery 41%" in client.get(f"/nodes/{node.name}/").content.decode(), "the newest sample knows best"
    assert "on battery 41%" in client.get("/").content.decode()
    assert "on battery 41%" in client.get("/nodes/").content.decode()
    plan = client.get("/models/plan/", {"model": model.pk, "nodes": [node.pk], "ctx": 512, "mode": "fastest"})
    text = plan.content.decode()
    assert 'id="laptops-to-watch"' in text and "on battery 41%" in text
    assert "may sleep or slow down as it drains" in text


def test_a_wifi_laptop_is_flagged_and_gets_less_work_than_a_wired_one_alike(power_lan, alice, model):
    _, lan = power_lan
    room = {"usable_memory": 700 * MiB}  # neither holds the model alone
    wifi, wifi_facts = probed(lan, 1, **room)
    wired, wired_facts = probed(lan, 2, **room)
    assert (wifi_facts["nic"], wifi_facts["link_kind"]) == ("wlp2s0", "wifi")
    assert (wired_facts["nic"], wired_facts["link_kind"]) == ("eth0", "wired")
    assert wifi_facts["rtt_ms"] > 0 and wired_facts["rtt_ms"] > 0
    plan = make_plan(model, [wifi, wired], 512)  # the Wi-Fi laptop first in the list: the link, not the list, decides
    held = {stage.machine.name: stage.count for stage in plan.stages[1:]}
    assert held[wired.name] > held[wifi.name] >= 1, held
    page = client_for(alice).get("/models/plan/", {"model": model.pk, "nodes": [wifi.pk, wired.pk], "ctx": 512,
                                                   "mode": "fastest"}).content.decode()
    assert f"Wi-Fi, {wifi_facts['rtt_ms']:.1f} ms round trip" in page
    assert f"On Wi-Fi: {wifi.name}. The plan counts a Wi-Fi laptop 10 % slower" in page
    watched = page.split('id="laptops-to-watch"')[1].split("</section>")[0]
    assert wifi.name in watched and wired.name not in watched


def test_a_laptop_without_a_default_route_still_knows_its_link(power_lan, db):
    harness, lan = power_lan
    netns = lan.laptops[0].netns
    run("ip", "-n", netns, "route", "del", "default")
    try:
        _, facts = probed(lan, 1)
        assert (facts["nic"], facts["link_kind"]) == ("wlp2s0", "wifi"), "the link holding the address SSH came in on"
    finally:
        run("ip", "-n", netns, "route", "replace", "default", "via", lan.gateway)


def test_a_battery_that_reads_nonsense_is_a_clear_unknown(power_lan, alice):
    harness, lan = power_lan
    simpower.set_battery(harness, 2, capacity="250", status=None, on_ac=None)
    try:
        node, facts = probed(lan, 2)
        assert facts["battery_state"] is None and facts["battery_percent"] is None
        assert facts["battery_note"] == ("the battery's charge reads '250', not a percent from 0 to 100; the battery "
                                         "does not say whether it charges, and no plug is reported")
        assert samples(node, 1)[0]["battery"]["percent"] is None
        page = client_for(alice).get(f"/nodes/{node.name}/").content.decode()
        assert "battery state unknown (the battery&#x27;s charge reads &#x27;250&#x27;" in page
        assert 'data-flag="battery"' not in page
    finally:
        simpower.remove_battery(harness, 2)


def test_a_laptop_held_back_by_a_cgroup_shows_throttling(power_lan, alice):
    _, lan = power_lan
    node, _ = probed(lan, 3)
    ssh.sh(node.ssh_target(), 'timeout 15 sh -c "while :; do :; done" >/dev/null 2>&1 &')
    found = samples(node, 10, until=lambda sample: (sample["throttled"] or 0) >= 0.5)
    assert found[-1]["throttled"] >= 0.5, [sample["throttled"] for sample in found]
    metrics.append(node.pk, found[-1])
    page = client_for(alice).get(f"/nodes/{node.name}/").content.decode()
    assert f"throttled {found[-1]['throttled']:.0%} of the time" in page
    facts = run_now(node, ActionKind.PROBE) and node.probes.first().facts
    assert facts["cpu_quota_cores"] == 0.2 and facts["cpu_throttled_share"] > 0
    assert "held to 0.2 cores by a cgroup" in client_for(alice).get(f"/nodes/{node.name}/").content.decode()


def test_a_laptop_shows_its_cpu_clock_against_its_top(power_lan, alice):
    harness, lan = power_lan
    simpower.set_cpu_clock(harness, 2, 1200000, 3400000)
    try:
        node, facts = probed(lan, 2)
        assert (facts["cpu_khz_now"], facts["cpu_khz_max"]) == (1200000, 3400000)
        sample = samples(node, 1)[0]
        assert (sample["cpu_khz"], sample["cpu_khz_max"]) == (1200000, 3400000)
        assert "at 1.2 of 3.4 GHz" in client_for(alice).get(f"/nodes/{node.name}/").content.decode()
    finally:
        simpower.remove_cpu_clock(harness, 2)
