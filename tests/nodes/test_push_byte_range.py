"""A byte range of a local file goes to a laptop whole or not at all, and a broken copy resumes."""

import hashlib
import os

import pytest

from nodes.remote import ssh
from nodes.servers import cache as rpccache
from tests.nodes.laptops import register


@pytest.fixture
def node(lan, db):
    the_lan = lan(3)
    node = register(the_lan, the_lan.laptops[2])
    ssh.sh(node.ssh_target(), "rm -rf .clusterpanel")  # the session's laptops may have a cache from another file
    yield node
    ssh.sh(node.ssh_target(), "rm -rf .clusterpanel")


def remote_sha256(target: ssh.SSHTarget, path: str) -> str:
    return ssh.sh(target, 'sha256sum "$1" | cut -c1-64', path).stdout.strip()


def test_it_copies_only_the_range_and_resumes_a_broken_copy(node, tmp_path):
    local = tmp_path / "model.bin"
    local.write_bytes(os.urandom(24 << 20))
    start, length = 3 << 20, 17 << 20 | 123
    wanted = hashlib.sha256(local.read_bytes()[start:start + length]).hexdigest()
    target, remote = node.ssh_target(), ".clusterpanel/cache/rpc/00112233aabbccdd"
    ssh.sh(target, 'mkdir -p "$1"', ".clusterpanel/cache/rpc")

    def cut_the_line(done: int, total: int) -> None:
        if done > total // 2:
            ssh.forget(target)

    with pytest.raises(ssh.SSHError):
        ssh.push(target, local, remote, progress=cut_the_line, start=start, length=length)
    assert rpccache.contents(target, "~/.clusterpanel")[1].keys() == {"00112233aabbccdd.part"}, "no whole-looking file"
    pushed = ssh.push(target, local, remote, start=start, length=length)
    assert pushed.resumed_from > 0 and pushed.sent == length - pushed.resumed_from
    assert remote_sha256(target, remote) == wanted
    free, files = rpccache.contents(target, "~/.clusterpanel")
    assert files == {"00112233aabbccdd": length} and free > 0
