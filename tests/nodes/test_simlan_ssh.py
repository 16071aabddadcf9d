"""Simulated laptops are reached over SSH only, each with its own pinned host key."""

import pytest

from nodes.remote import ssh
from tests.nodes.laptops import target


def test_it_reaches_three_laptops_over_ssh_with_their_pinned_host_keys(lan):
    laptops = lan(3).laptops
    seen = set()
    for laptop in laptops:
        result = ssh.run(target(lan(3), laptop), ["sh", "-c", 'echo "$(id -un) $(hostname) $(hostname -I)"'])
        assert result.exit_status == 0
        user, hostname, address = result.stdout.split()
        assert (user, hostname, address) == (laptop.user, laptop.netns, laptop.address)
        seen.add(laptop.host_key)
    assert len(seen) == 3, "each laptop has a host key of its own"


def test_it_pins_the_key_the_laptop_really_presents(lan):
    laptop = lan(3).laptops[0]
    presented = ssh.host_key_of(laptop.address)
    assert presented == laptop.host_key
    assert ssh.fingerprint(presented) == laptop.host_key_fingerprint


def test_it_refuses_a_laptop_whose_host_key_is_not_the_pinned_one(lan):
    first, second = lan(3).laptops[:2]
    with pytest.raises(ssh.HostKeyMismatch) as error:
        ssh.run(target(lan(3), first, host_key=second.host_key), ["true"])
    assert error.value.permanent
    assert first.host_key_fingerprint in str(error.value)


def test_it_lets_a_laptop_user_in_with_the_password_the_lan_set(lan):
    laptop = lan(3).laptops[1]
    password_target = ssh.SSHTarget(laptop.address, laptop.user, laptop.host_key, password=laptop.password)
    assert ssh.run(password_target, ["whoami"]).stdout.strip() == laptop.user


def test_it_says_plainly_when_a_password_is_wrong(lan):
    laptop = lan(3).laptops[1]
    wrong = ssh.SSHTarget(laptop.address, laptop.user, laptop.host_key, password="wrong")
    with pytest.raises(ssh.SSHError, match="refused our key or password") as error:
        ssh.run(wrong, ["true"])
    assert error.value.permanent
