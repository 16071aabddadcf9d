"""The panel measures each laptop's speed with llama.cpp itself, and a slowed laptop measures slower."""


import pytest

from nodes.models import ActionKind, ActionStatus
from nodes.probing import speed
from nodes.remote import ssh
from tests.nodes.laptops import register, run_now
from tests.services import lan_harness


@pytest.fixture(scope="module")
def speed_lan():
    harness = lan_harness("speed", "10.238.0.0/24")
    lan = harness.up(2)
    # a tenth of one core: clearly slower even while the other laptop shares this machine with three test workers
    harness.limit(2, lan.laptops[1].sshd_pid, None, 0.1)
    yield lan
    harness.down()


def test_it_measures_a_slowed_laptop_as_slower(speed_lan, db):
    nodes = [register(speed_lan, laptop) for laptop in speed_lan.laptops]
    for node in nodes:
        assert run_now(node, ActionKind.INSTALL_RUNTIME).status == ActionStatus.SUCCEEDED
        action = run_now(node, ActionKind.MEASURE_SPEED)
        assert action.status == ActionStatus.SUCCEEDED, action.error
        node.refresh_from_db()
        assert node.speed_gb_s > 0 and node.speed_measured_at
        ssh.forget(node.ssh_target())
    full, slowed = nodes
    assert slowed.speed_gb_s < full.speed_gb_s / 2


def test_it_needs_the_runtime_first(speed_lan, db):
    node = register(speed_lan, speed_lan.laptops[0], name="bare")
    action = run_now(node, ActionKind.MEASURE_SPEED)
    assert action.status == ActionStatus.FAILED and "Install the runtime first" in action.error


def test_a_very_slow_device_reads_slow_not_zero():
    # lavapipe on a busy core measured 0.004 GB/s in CI: two decimals made it 0.0, "never measured" to the planner
    assert speed.figure(0.00437) == 0.00437
    assert speed.figure(23.456) == 23.5 and speed.figure(9.5) == 9.5
