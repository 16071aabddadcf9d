"""An ARM laptop joins with the prebuilt aarch64 bundle: probed as aarch64 (its own libstdc++ read), given the bundle
of its architecture, its rpc-server started, layers planned on it beside an x86-64 laptop, tokens produced and the
answer verified against the head's alone. A laptop of an architecture no bundle is built for is refused in words
that offer the build on the laptop, and nothing is copied.

The ARM laptop is a simulated laptop whose aarch64 programs run under qemu-user (nodes/simlan/arm.py says what is
faked: `uname -m`, and the arm64 system libraries taken from Debian's cross packages). The riscv64 laptop is
the same shim alone: nothing of it runs, as nothing of it should. Both are the run's own (tests/emulated.py,
made once per run); the x86-64 laptop is the first of the run's simulated LAN. Under qemu, the one deployment
(the last test) is the end-to-end path: the other tests run the aarch64 server only to list its devices.
"""

import pytest

from jobs.engine import verify
from models_app.deploying import deploy
from models_app.library.adding import ensure_bundled
from models_app.models import DeploymentStatus
from nodes.models import ActionKind, ActionStatus, RpcServer, ServerStatus
from nodes.remote import ssh
from nodes.runtime.bundle import find_bundle
from tests.conftest import wait_until
from tests.jobs.cluster import end_engines, engine_ready
from tests.nodes.laptops import register, run_now


@pytest.fixture
def laptops(arm_lan, lan, transactional_db):
    """The ARM laptop, an x86-64 one and the riscv64 one, registered."""
    emulated, plain = arm_lan.status(), lan(3)
    arm, riscv = emulated.laptops
    nodes = [register(emulated, arm), register(plain, plain.laptops[0]), register(emulated, riscv)]
    yield nodes
    for node in nodes:
        ssh.forget(node.ssh_target())


def test_an_arm_laptop_is_probed_and_given_the_aarch64_bundle(laptops):
    arm, x86, _ = laptops
    probe = run_now(arm, ActionKind.PROBE)
    assert probe.status == ActionStatus.SUCCEEDED, probe.error
    facts = arm.probes.first().facts
    assert facts["arch"] == "aarch64" and facts["glibcxx"], facts  # the arm64 libstdc++, not this machine's
    installed = run_now(arm, ActionKind.INSTALL_RUNTIME)
    assert installed.status == ActionStatus.SUCCEEDED, installed.error
    bundle = find_bundle("aarch64")
    assert bundle.manifest["arch"] == "aarch64" and arm.refresh_from_db() is None and arm.runtime == bundle.sha256[:12]
    assert "Devices: CPU" in installed.message, installed.message  # the aarch64 rpc-server listed them, under qemu
    assert arm.probes.first().facts["runtime_protocol"] == find_bundle().rpc_protocol
    assert run_now(x86, ActionKind.INSTALL_RUNTIME).status == ActionStatus.SUCCEEDED
    x86.refresh_from_db()
    assert x86.runtime == find_bundle().sha256[:12] != arm.runtime


def test_an_unknown_architecture_is_refused_with_the_build_offered_and_nothing_copied(laptops):
    riscv = laptops[2]
    action = run_now(riscv, ActionKind.INSTALL_RUNTIME)
    assert action.status == ActionStatus.FAILED
    assert action.error == (
        "This laptop cannot run the llama.cpp runtime: its CPU is riscv64; the runtime is built for x86_64, and "
        "prebuilt runtimes are for x86_64 and aarch64 laptops only. \"Build the runtime here\" on its page builds "
        "one on the laptop itself, from the head's own llama.cpp source."), action.error
    left = ssh.sh(riscv.ssh_target(), 'ls -A "$1" 2>/dev/null', ssh.remote_path(riscv.install_dir)).stdout.split()
    assert "runtime" not in left and "downloads" not in left, left


def test_layers_on_the_arm_laptop_answer_and_the_answer_is_verified(laptops, supervisor, bob, monkeypatch):
    # Verify of 12 tokens: each costs about 0.7 s on an emulated laptop, and 48 are compared in test_engine.
    monkeypatch.setattr(verify, "TOKENS", 12)
    monkeypatch.setitem(verify.GREEDY, "max_tokens", 12)
    arm, x86, _ = laptops
    for node in (arm, x86):
        assert run_now(node, ActionKind.INSTALL_RUNTIME).status == ActionStatus.SUCCEEDED
    deployment = deploy.create(ensure_bundled(), [arm, x86], 512, mode="even")
    planned = [stage["machine"] for stage in deployment.plan["stages"][1:]]
    assert planned == [arm.name, x86.name]
    try:
        deploy.prepare(deployment)
        deployment.refresh_from_db()
        assert deployment.status == DeploymentStatus.READY, deployment.status_detail
        server = RpcServer.objects.get(stage__deployment=deployment, node=arm)
        assert server.status == ServerStatus.RUNNING
        on_arm = [kinds for device, kinds in deployment.plan["allocated_by_device"].items()
                  if device.startswith("RPC0[")]
        assert on_arm and on_arm[0]["model"] > 10 * 2**20, deployment.plan["allocated_by_device"]
        engine_ready(deployment, within=600)
        report = verify.verify(deployment, user=bob, within=1200)
        print(f"Verify on the ARM laptop under qemu: {report['result']}", {k: report.get(k) for k in (
            "position", "reference_token", "distributed_token", "detail")})
        assert report["result"] in ("identical", "different"), report.get("detail", report)
        assert report["distributed"].strip(), "the deployment answered"
        if report["result"] == "different":  # ARM kernels may round apart from x86's: said, not hidden
            assert report["position"] >= 0 and report["reference_token"] != report["distributed_token"]
        deployment.refresh_from_db()
        assert deployment.verification["result"] == report["result"]
    finally:
        deploy.stop(deployment)
        wait_until(lambda: not RpcServer.objects.filter(status=ServerStatus.RUNNING).exists(), 60,
                   "every rpc-server stopped")
        supervisor.terminate()
        supervisor.wait(30)
        end_engines()
