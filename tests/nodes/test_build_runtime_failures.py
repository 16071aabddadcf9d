"""A build that cannot start, is killed or loses its connection says at which step, leaves nothing half-made on
the laptop, and the laptop keeps the runtime it had."""

import os
import subprocess
import threading
import time

import pytest

from nodes.models import ActionKind, ActionStatus
from nodes.probing import probe
from nodes.remote import ssh
from nodes.runtime import install
from tests.nodes.laptops import register, run_now, target

FOLDER = "~/.cp-fail"


@pytest.fixture
def laptop(lan):
    the_lan = lan(3)
    return the_lan, the_lan.laptops[2]


@pytest.fixture
def node(laptop, db, runtime_bundle):
    """A laptop running the bundle, as before any build."""
    made = register(*laptop, name="failing")
    made.install_dir = FOLDER
    made.save(update_fields=["install_dir"])
    reach = made.ssh_target()
    ssh.sh(reach, 'rm -rf -- "$1" .cp-nocmake', ".cp-fail")
    install.install_runtime(reach, FOLDER, runtime_bundle, probe.probe(reach, FOLDER), lambda *a, **k: None)
    yield made
    ssh.sh(reach, 'rm -rf -- "$1"', ".cp-fail")


def runtime_folder(node) -> list[str]:
    return ssh.sh(node.ssh_target(), "ls -a .cp-fail/runtime").stdout.split()


def current(node) -> str:
    return ssh.sh(node.ssh_target(), "readlink .cp-fail/runtime/current").stdout.strip()


def when_compiling(node, then) -> threading.Thread:
    """Once the build on the laptop has compiled a file or two, do `then(pid of the build's shell)`."""
    def watch() -> None:
        reach = node.ssh_target()
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            found = ssh.sh(reach, 'grep -l "^\\[2/" .cp-fail/runtime/build-*.log >/dev/null 2>&1 && '
                                  'cat .cp-fail/runtime/.build-*/pid').stdout.strip()
            if found.isdigit():
                then(found)
                return
            time.sleep(0.5)
    watcher = threading.Thread(target=watch)
    watcher.start()
    return watcher


@pytest.fixture
def no_cmake(laptop, tmp_path):
    """This laptop's cmake made unusable, for its own sessions only: its sshd runs in a mount namespace of its own
    (`ip netns exec` makes one), where a non-executable empty file is mounted over /usr/bin/cmake."""
    empty = tmp_path / "no-cmake"
    empty.touch(mode=0o644)
    sshd = str(laptop[1].sshd_pid)
    assert os.readlink(f"/proc/{sshd}/ns/mnt") != os.readlink("/proc/self/ns/mnt"), "would hide this machine's cmake"
    subprocess.run(["nsenter", "-t", sshd, "-m", "--", "mount", "--bind", str(empty), "/usr/bin/cmake"], check=True)
    yield
    subprocess.run(["nsenter", "-t", sshd, "-m", "--", "umount", "/usr/bin/cmake"], check=True)


def test_a_laptop_without_cmake_is_told_how_to_get_it_and_nothing_is_copied(laptop, db, no_cmake):
    made = register(*laptop, name="nocmake")
    made.install_dir = "~/.cp-nocmake"
    made.save(update_fields=["install_dir"])
    action = run_now(made, ActionKind.BUILD_RUNTIME)
    assert action.status == ActionStatus.FAILED
    # ggml's minimum: the simulated laptop has this machine's glslc and Vulkan headers but no GPU device, so no
    # Vulkan build and not its 3.19.
    assert action.error == ("This laptop cannot build the runtime yet: it lacks cmake (3.14 or newer). On Debian or "
                            "Ubuntu: `sudo apt install cmake`. Then build again.")
    assert ssh.sh(made.ssh_target(), "ls -d .cp-nocmake").exit_status != 0  # not even its folder was made


def test_a_build_killed_midway_names_its_step_and_leaves_the_runtime_it_had(node, runtime_bundle):
    watcher = when_compiling(node, lambda pid: ssh.sh(node.ssh_target(), 'kill -TERM "$1"', pid))
    action = run_now(node, ActionKind.BUILD_RUNTIME)
    watcher.join()
    assert action.status == ActionStatus.FAILED
    assert action.error.startswith("The build failed at step build (compiling); nothing was installed and the "
                                   "laptop keeps its previous runtime. The last lines of its log"), action.error
    assert current(node) == runtime_bundle.sha256[:12]
    assert not [name for name in runtime_folder(node) if name.startswith((".build-", "built-"))]
    assert ssh.sh(node.ssh_target(), "pgrep -u \"$(id -un)\" -x ninja").exit_status == 1  # nothing compiles on


def test_a_build_that_loses_its_connection_is_ended_on_the_laptop(node, runtime_bundle):
    watcher = when_compiling(node, lambda pid: ssh.forget(node.ssh_target()))  # the link drops mid-build
    action = run_now(node, ActionKind.BUILD_RUNTIME)
    watcher.join()
    assert action.status == ActionStatus.FAILED
    assert "at step build" in action.error and "the connection to the build broke" in action.error, action.error
    deadline = time.monotonic() + 60
    while [name for name in runtime_folder(node) if name.startswith(".build-")] and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not [name for name in runtime_folder(node) if name.startswith((".build-", "built-"))]
    assert current(node) == runtime_bundle.sha256[:12]



def test_a_laptop_the_bundle_cannot_serve_is_pointed_to_a_build_of_its_own(laptop, runtime_bundle):
    mac = {"os": "Darwin", "arch": "arm64"}  # as a Mac's probe says it
    with pytest.raises(install.InstallRefused) as refused:
        install.install_runtime(target(*laptop), "~/.cp-mac", runtime_bundle, mac, lambda *a, **k: None)
    assert str(refused.value) == (
        "This laptop cannot run the llama.cpp runtime: it runs macOS, and there is no macOS bundle (the runtime is "
        "built for Linux); a Mac builds its own, with Metal on Apple silicon, once the Xcode command line tools and "
        "cmake are there; its CPU is arm64; the runtime is built for x86_64. \"Build the runtime here\" on its "
        "page builds one on the laptop itself, from the head's own llama.cpp source.")
