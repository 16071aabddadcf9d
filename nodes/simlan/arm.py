"""A simulated ARM laptop: a laptop of the simulated LAN (nodes/simlan/lan.py) that runs 64-bit ARM programs, through
qemu-user, to which the kernel's binfmt_misc hands every aarch64 executable.

Real: the laptop's sshd and login, the aarch64 runtime bundle (cross-compiled from the head's own source) and
its ARM CPU kernels, executed instruction by instruction by QEMU as a Raspberry Pi 5's Cortex-A76 (NEON, dot
product, FP16 arithmetic). There is no ARM machine here, so two things stand in, both set for every session by
the laptop's sshd:
- the one fake: `uname -m` says aarch64, through a shim first on the laptop's PATH. The shell and the tools
  around the runtime stay this machine's x86-64 programs, and /proc/cpuinfo still shows this machine's CPU;
- the aarch64 system libraries (glibc, libstdc++) are Debian's arm64 cross packages, where QEMU_LD_PREFIX
  points QEMU's dynamic loader.

binfmt_misc is the kernel's, shared by the whole machine: the entry goes in under a name of the LAN's own, with
the F flag (QEMU is opened once, at registration, so the laptops' namespaces reach it), and leaves with the LAN
(`forget_binfmt`, called by SimLan.down). An aarch64 entry already there (qemu-user-static's own, registered by
systemd-binfmt or binfmt-support) is used as it is and left alone. Needs root.

`pretend` alone, without QEMU, gives a laptop another `uname -m` and nothing else: a laptop of an architecture no
bundle is built for (riscv64, armv7l), for the refusals, where nothing of the runtime should ever run.
"""

import shutil
import subprocess
from pathlib import Path

BINFMT = Path("/proc/sys/fs/binfmt_misc")
SYSROOT = "/usr/aarch64-linux-gnu"  # libc6-arm64-cross, libstdc++6-arm64-cross: come with the cross compiler
PI5_CPU = "cortex-a76"
# The ELF header of a 64-bit little-endian aarch64 executable or shared object, as qemu-user-static's own
# entry (/usr/lib/binfmt.d/qemu-aarch64.conf) matches it.
MAGIC = r"\x7f\x45\x4c\x46\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\xb7\x00"
MASK = r"\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff"
MAGIC_HEX = MAGIC.replace(r"\x", "")
UNAME = """#!/bin/sh
# clusterpanel's simulated ARM laptop: the machine is aarch64 (nodes/simlan/arm.py); the rest is uname's own.
case "$1" in
  -m|-p|-i) echo aarch64 ;;
  *) /usr/bin/uname "$@" | sed 's/x86_64/aarch64/g' ;;
esac
"""


class SimArmError(RuntimeError):
    pass


def entry_name(lan_name: str) -> str:
    return f"clusterpanel-{lan_name}-aarch64"


def interpreter() -> str:
    found = shutil.which("qemu-aarch64-static") or shutil.which("qemu-aarch64")
    if not found:
        raise SimArmError("A simulated ARM laptop needs qemu-user-static: apt-get install qemu-user-static "
                          "(make setup-test installs it).")
    if not Path(SYSROOT, "lib", "libstdc++.so.6").exists():
        raise SimArmError(f"A simulated ARM laptop needs the arm64 system libraries in {SYSROOT}: apt-get install "
                          "g++-aarch64-linux-gnu (make setup-test installs it).")
    return found


def mounted() -> bool:
    if (BINFMT / "register").exists():
        return True
    subprocess.run(["mount", "-t", "binfmt_misc", "binfmt_misc", str(BINFMT)], capture_output=True)
    return (BINFMT / "register").exists()


def aarch64_entry() -> str | None:
    """The name of an enabled binfmt_misc entry of this machine's own that runs aarch64 executables, if any."""
    for path in sorted(BINFMT.iterdir()):
        if path.name in ("register", "status"):
            continue
        text = path.read_text(errors="replace")
        # Another LAN's own entry goes when that LAN goes: not one to lean on.
        if text.startswith("enabled") and f"magic {MAGIC_HEX}" in text and not path.name.startswith("clusterpanel-"):
            return path.name
    return None


def run_aarch64(lan_name: str) -> str:
    """The binfmt_misc entry that runs aarch64 executables: one there already, else one made for this LAN."""
    qemu = interpreter()
    if not mounted():
        raise SimArmError(f"binfmt_misc is not mounted at {BINFMT} and cannot be: a simulated ARM laptop needs it "
                          "(mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc, as root).")
    found = aarch64_entry()
    if found:
        return found
    name = entry_name(lan_name)
    if not (BINFMT / name).exists():  # the LAN's second ARM laptop runs through the first one's
        (BINFMT / "register").write_text(f":{name}:M::{MAGIC}:{MASK}:{qemu}:F")
    return name


def forget_binfmt(lan_name: str) -> list[str]:
    """The LAN's own binfmt_misc entry removed, if it made one."""
    path = BINFMT / entry_name(lan_name)
    if not path.exists():
        return []
    path.write_text("-1")
    return [f"binfmt entry {path.name}"]


def make_arm(harness, i: int, cpu: str = PI5_CPU) -> str:
    """Laptop `i` of the LAN (a nodes.simlan.lan.SimLan) becomes an aarch64 laptop with `cpu`'s features; its sshd
    restarts to give every session the shim and QEMU's settings (the processes it started go on). The binfmt
    entry it runs through."""
    entry = run_aarch64(harness.name)
    pretend(harness, i, UNAME, f"QEMU_LD_PREFIX={SYSROOT}", f"QEMU_CPU={cpu}")
    return entry


def pretend(harness, i: int, uname: str, *env: str) -> None:
    """Laptop `i`'s sessions run `uname` (a shell script) for uname, with `env` (NAME=value) set."""
    lan, laptop, laptop_dir = harness.laptop(i)
    shims = laptop_dir / "machine-bin"
    shims.mkdir(mode=0o755, exist_ok=True)
    (shims / "uname").write_text(uname)
    (shims / "uname").chmod(0o755)
    config = laptop_dir / "sshd_config"
    lines = config.read_text().splitlines()
    if any(line.startswith("SetEnv") for line in lines):  # sshd takes the first SetEnv line alone
        raise SimArmError(f"Laptop {i} already has an environment of its own (SetEnv in {config}).")
    setting = " ".join([*env, f"PATH={shims}:/usr/local/bin:/usr/bin:/bin"])
    config.write_text("\n".join([*lines, f"SetEnv {setting}"]) + "\n")
    harness.restart_sshd(lan, laptop, laptop_dir)
    harness.save(lan)
