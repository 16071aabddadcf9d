"""The runtime goes onto a laptop once, intact, resuming and repairing as needed."""

import pytest

from nodes.models import ActionKind, ActionStatus
from nodes.remote import ssh, transfer
from nodes.runtime import install
from tests.nodes.laptops import register, run_now


@pytest.fixture
def node(lan, db):
    the_lan = lan(3)
    node = register(the_lan, the_lan.laptops[2])
    ssh.sh(node.ssh_target(), "rm -rf .clusterpanel")  # the session's laptops may have it from another file
    yield node
    ssh.sh(node.ssh_target(), "rm -rf .clusterpanel")


def test_it_installs_the_runtime_and_checks_every_file(node, runtime_bundle):
    action = run_now(node, ActionKind.INSTALL_RUNTIME)
    assert action.status == ActionStatus.SUCCEEDED, action.error
    assert action.progress["copied"] is True
    assert action.progress["bytes_total"] == runtime_bundle.tarball.stat().st_size
    path = action.progress["path"]
    assert install.is_intact(node.ssh_target(), path, runtime_bundle)
    version = ssh.sh(node.ssh_target(), '"$1/bin/ggml-rpc-server" --help 2>&1 | grep Usage', ssh.remote_path(path))
    assert "Usage" in version.stdout


def test_it_skips_a_runtime_that_is_already_there_and_intact(node):
    run_now(node, ActionKind.INSTALL_RUNTIME)
    again = run_now(node, ActionKind.INSTALL_RUNTIME)
    assert again.status == ActionStatus.SUCCEEDED
    assert again.progress["copied"] is False
    assert "already installed and intact" in again.message


def test_it_repairs_a_runtime_file_damaged_on_the_laptop(node, runtime_bundle):
    path = run_now(node, ActionKind.INSTALL_RUNTIME).progress["path"]
    ssh.sh(node.ssh_target(), 'printf garbage >> "$1/bin/libggml-rpc.so"', ssh.remote_path(path))
    assert not install.is_intact(node.ssh_target(), path, runtime_bundle)
    repaired = run_now(node, ActionKind.INSTALL_RUNTIME)
    assert repaired.status == ActionStatus.SUCCEEDED
    assert repaired.progress["repaired"] is True
    assert install.is_intact(node.ssh_target(), path, runtime_bundle)


def test_it_resumes_an_interrupted_copy_instead_of_starting_over(node, runtime_bundle):
    target, size = node.ssh_target(), runtime_bundle.tarball.stat().st_size
    remote = ".clusterpanel/downloads/runtime.tar.gz"
    ssh.sh(target, "mkdir -p .clusterpanel/downloads")

    def cut_the_line(done: int, total: int) -> None:
        if done > total // 3:
            ssh.forget(target)  # the connection drops mid-copy

    with pytest.raises(ssh.SSHError):
        ssh.push(target, runtime_bundle.tarball, remote, progress=cut_the_line)
    done = transfer.push_verified(target, runtime_bundle.tarball, remote, runtime_bundle.sha256, lambda *a, **k: None)
    assert done.resumed_from > 0
    assert done.sent < size
    assert transfer.remote_sha256(target, remote) == runtime_bundle.sha256


def test_it_refuses_a_laptop_that_cannot_run_the_runtime_in_plain_words(runtime_bundle):
    mac = install.problems({"os": "Darwin", "arch": "arm64"}, runtime_bundle.manifest)
    assert any("runs macOS" in reason and "no macOS bundle" in reason and "Linux" in reason for reason in mac)
    assert any("arm64" in reason for reason in mac)
    old = install.problems({"os": "Linux", "arch": "x86_64", "glibc": "2.31", "glibcxx": "3.4.28"},
                           runtime_bundle.manifest)
    assert any("glibc is 2.31" in reason for reason in old)
    assert any("GLIBCXX_3.4.28" in reason for reason in old)
    assert install.problems({"os": "Linux", "arch": "x86_64", "glibc": "2.39", "glibcxx": "3.4.33"},
                            runtime_bundle.manifest) == []
