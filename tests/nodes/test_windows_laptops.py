"""Windows laptops: one logged in to natively (its shell answers as cmd.exe does) is refused at registration and at a
probe, in words that point to WSL2, with nothing saved; one running WSL2 (its kernel says so: a `uname` shim, since
/proc/version cannot be changed here) is probed as Linux and shown as "Windows (WSL2)" with its memory limit.

What is faked (nodes/simlan/systems.py): the native laptop's login shell, a script answering as cmd.exe does; the WSL2
laptop's `uname`. Everything else is the simulated laptop's own: sshd, its user, its Linux."""

from pathlib import Path

import pytest

from nodes.laptops.registration import RegistrationError, register
from nodes.models import ActionKind, ActionStatus, Node
from nodes.remote import ssh
from nodes.simlan.systems import make_windows, make_wsl2
from tests.conftest import PASSWORD
from tests.nodes.laptops import register as register_directly
from tests.nodes.laptops import run_now
from tests.services import lan_harness

RECORDING = Path(__file__).parent / "fixtures" / "platforms" / "wsl2-ubuntu.txt"


@pytest.fixture(scope="module")
def windows_lan():
    harness = lan_harness("windows", "10.221.0.0/24")
    harness.up(2)
    try:
        make_windows(harness, 1)
        make_wsl2(harness, 2, RECORDING)
        yield harness.status()
    finally:
        harness.down()


def unsaved(lan, laptop, name: str, key: bool = True) -> Node:
    return Node(name=name, host=laptop.address, username=laptop.user, host_key=laptop.host_key,
                private_key=Path(lan.key_path).read_text() if key else "")


def test_a_native_windows_login_is_refused_pointing_to_wsl2_and_nothing_is_saved(windows_lan, db):
    laptop = windows_lan.laptops[0]
    with pytest.raises(RegistrationError) as refused:
        register(unsaved(windows_lan, laptop, "lab-pc"))
    said = str(refused.value)
    assert f"{laptop.address} is a Windows laptop answering with Windows' own shell" in said
    assert "WSL2" in said and "`wsl --install -d Ubuntu`" in said and "`sudo apt install openssh-server`" in said
    assert not Node.objects.exists()


def test_with_a_password_it_is_refused_before_any_key_is_added(windows_lan, db):
    laptop = windows_lan.laptops[0]
    authorized = Path(laptop.home) / ".ssh" / "authorized_keys"
    before = authorized.read_text()
    with pytest.raises(RegistrationError, match="joins through WSL2"):
        register(unsaved(windows_lan, laptop, "lab-pc", key=False), password=laptop.password)
    assert authorized.read_text() == before and not Node.objects.exists()


def test_a_registered_laptop_that_turns_out_to_be_windows_is_refused_at_its_probe(windows_lan, db):
    node = register_directly(windows_lan, windows_lan.laptops[0], name="was-linux")
    action = run_now(node, ActionKind.PROBE)
    assert action.status == ActionStatus.FAILED and "joins through WSL2" in action.error
    assert not node.probes.exists()
    ssh.forget(node.ssh_target())


def test_a_wsl2_laptop_is_probed_as_linux_and_shown_as_windows_wsl2(windows_lan, db, client, alice):
    node = register(unsaved(windows_lan, windows_lan.laptops[1], "lab-wsl"), probe=False)
    action = run_now(node, ActionKind.PROBE)
    assert action.status == ActionStatus.SUCCEEDED, action.error
    facts = node.probes.first().facts
    assert (facts["os"], facts["wsl"], facts["kernel"]) == ("Linux", 2, "5.15.153.1-microsoft-standard-WSL2")
    assert facts["platform"].startswith("Windows (WSL2) · ") and facts["ram_total"] > 0
    client.login(username="alice", password=PASSWORD)
    page = client.get(f"/nodes/{node.name}/").content.decode()
    assert "Windows (WSL2) · " in page and "half of the Windows laptop&#x27;s RAM" in page
    ssh.forget(node.ssh_target())
