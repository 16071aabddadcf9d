"""The emulated laptops, made once per test run (a pytest session; each pytest-xdist worker has its own) and removed
at its end: `arm_lan`, whose laptop 1 runs aarch64 programs under qemu-user (nodes/simlan/arm.py) and whose laptop 2
says it is riscv64 and runs nothing of the runtime; `lavapipe_lan`, whose laptop 1 has a GPU through Mesa's
lavapipe (SimLan.give_vulkan_gpu). Each holds only what no plain laptop can be: a test that also needs x86-64
laptops takes them from the run's own simulated LAN (`lan`, tests/conftest.py).

Made once, not once per file: the LAN, QEMU's binfmt entry, and lavapipe's compiled shaders. Lavapipe compiles
the ggml shaders a server runs into the laptop user's Mesa shader cache (~/.cache/mesa_shader_cache): a cold
cache costs about 45 s of the laptop's one core more, at the first server that generates, than a warm one
(65 s against 21 s measured here for a 12-token prompt). Both files that generate on the lavapipe laptop
(tests/nodes/test_vulkan_laptop.py, tests/models_app/test_deploy_with_a_gpu_laptop.py) pay it once per run.

A test that changes one of these laptops (takes its GPU away, say) puts it back before it ends, and stops every
rpc-server it started there. tests/conftest.py imports these fixtures, so that every test file shares them."""

from collections.abc import Iterator

import pytest

from nodes.simlan import arm as simarm
from tests.services import lan_harness

RISCV_UNAME = '#!/bin/sh\ncase "$1" in -m|-p|-i) echo riscv64 ;; *) exec /usr/bin/uname "$@" ;; esac\n'


@pytest.fixture(scope="session")
def arm_lan() -> Iterator:
    """The SimLan of the emulated ARM laptop (laptop 1) and the riscv64 one (laptop 2)."""
    harness = lan_harness("arm", "10.252.0.0/24")
    harness.up(2)
    try:
        simarm.make_arm(harness, 1)
        simarm.pretend(harness, 2, RISCV_UNAME)
        yield harness
    finally:
        harness.down()


@pytest.fixture(scope="session")
def lavapipe_lan() -> Iterator:
    """The SimLan of the laptop with a Vulkan GPU (Mesa's lavapipe): laptop 1."""
    harness = lan_harness("vulkan", "10.248.0.0/24")
    harness.up(1)
    try:
        harness.give_vulkan_gpu(1)
        yield harness
    finally:
        harness.down()
