"""Laptops for supervisor tests: every laptop of the simulated LAN registered with the runtime installed; the
rpc-servers a test leaves running are ended with it."""

import pytest

from nodes.models import ActionKind
from nodes.remote import ssh
from tests.nodes.laptops import register_all


@pytest.fixture
def nodes(lan, transactional_db):
    made = register_all(lan(3), then=ActionKind.INSTALL_RUNTIME)
    yield made
    for node in made:
        ssh.sh(node.ssh_target(), 'for f in .clusterpanel/rpc/*/pid; do kill "$(cat "$f")"; done 2>/dev/null; true')
