"""A laptop whose SSH hangs while it is being connected to holds up no other laptop's connection in the process."""

import threading
import time

import pytest

from nodes.remote import ssh
from tests.nodes.laptops import target
from tests.nodes.trouble import frozen_sshd


@pytest.fixture
def targets(lan):
    the_lan = lan(3)
    made = [target(the_lan, laptop) for laptop in the_lan.laptops]
    for each in made:
        ssh.forget(each)  # every call below connects anew
    yield the_lan, made
    for each in made:
        ssh.forget(each)


def test_it_connects_to_a_healthy_laptop_while_another_hangs_in_its_connect(targets):
    lan, (hung, healthy, other) = targets
    failures = []

    def connect_to_hung():
        try:
            ssh.run(hung, ["true"])
        except ssh.SSHError as exc:
            failures.append(exc)

    with frozen_sshd(lan.laptops[0]):
        stuck = threading.Thread(target=connect_to_hung)
        stuck.start()
        time.sleep(0.5)  # it is now waiting for the hung laptop's banner (up to ssh.CONNECT_TIMEOUT)
        began = time.monotonic()
        assert ssh.run(healthy, ["echo", "hi"]).stdout == "hi\n"
        took = time.monotonic() - began
        assert stuck.is_alive(), "the hung laptop's connect was still waiting meanwhile"
        stuck.join(ssh.CONNECT_TIMEOUT + 5)
    assert took < 3, f"a healthy laptop waited {took:.1f} s behind a hung one"
    assert failures and "Cannot reach" in str(failures[0])


def test_it_opens_one_connection_when_two_threads_ask_for_the_same_laptop_at_once(targets):
    _, (_, _, laptop) = targets
    clients, start = [], threading.Barrier(2)

    def ask():
        start.wait()
        clients.append(ssh.pooled(laptop))

    threads = [threading.Thread(target=ask) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(clients) == 2 and clients[0] is clients[1]
