"""A simulated laptop's power and link, faked where this machine has none: a battery, a Wi-Fi name, a tool.

A real laptop's battery lives in /sys/class/power_supply and its Wi-Fi card
names itself wl*; this machine has neither, and its simulated laptops have no
logind for systemd-inhibit. Each laptop's sshd runs in a mount namespace of its
own (`ip netns exec` made it), so a folder bound over
/sys/class/power_supply there is that laptop's battery alone, seen by every
process its sshd starts. The laptop's link is renamed inside its network
namespace. A tool (a shim `systemd-inhibit`) goes first on the PATH sshd gives
the laptop's logins. Needs root, like nodes/simlan/lan.py.
"""

import shutil
from pathlib import Path

from nodes.simlan.lan import SimLan, run

POWER_SUPPLY = "/sys/class/power_supply"
CPU0 = "/sys/devices/system/cpu/cpu0"
TOOLS_PATH = "/usr/local/bin:/usr/bin:/bin"


def supplies(lan: SimLan, i: int) -> Path:
    return lan.state_dir / f"laptop{i}" / "power_supply"


def in_laptop_mounts(lan: SimLan, i: int, *argv: str, check: bool = True):
    """Run `argv` in the mount namespace of laptop `i`'s sshd (where its logins' processes live)."""
    _, laptop, _ = lan.laptop(i)
    return run("nsenter", f"--mount=/proc/{laptop.sshd_pid}/ns/mnt", *argv, check=check)


def set_battery(lan: SimLan, i: int, capacity: str | None = "43", status: str | None = "Discharging",
                on_ac: str | None = "0", mouse: bool = False) -> None:
    """Give laptop `i` a battery (BAT0) and a mains supply (AC), as sysfs shows them; None leaves a file out (a
    driver that does not report it). Called again, it changes what the files say, at once. `mouse`: a wireless
    mouse's battery too, listed after BAT0 as Logitech's driver names it (scope Device: not the laptop's)."""
    folder = supplies(lan, i)
    battery, mains = folder / "BAT0", folder / "AC"
    supplies_of = [(battery, {"type": "Battery", "capacity": capacity, "status": status}),
                   (mains, {"type": "Mains", "online": on_ac})]
    if mouse:
        supplies_of.append((folder / "hidpp_battery_0", {"type": "Battery", "scope": "Device", "capacity": "5",
                                                         "status": "Discharging"}))
    for path, values in supplies_of:
        path.mkdir(parents=True, exist_ok=True)
        for name, value in values.items():
            (path / name).unlink(missing_ok=True)
            if value is not None:
                (path / name).write_text(value + "\n")
    for path in (folder, *folder.iterdir(), *(entry for each, _ in supplies_of for entry in each.iterdir())):
        path.chmod(0o755 if path.is_dir() else 0o644)
    if not battery_bound(lan, i):
        in_laptop_mounts(lan, i, "mount", "--bind", str(folder), POWER_SUPPLY)


def bound(lan: SimLan, i: int, where: str) -> bool:
    mounts = in_laptop_mounts(lan, i, "cat", "/proc/self/mountinfo").stdout
    return any(line.split()[4] == where for line in mounts.splitlines())


def battery_bound(lan: SimLan, i: int) -> bool:
    return bound(lan, i, POWER_SUPPLY)


def unbind(lan: SimLan, i: int, where: str, folder: Path) -> None:
    while bound(lan, i, where):
        in_laptop_mounts(lan, i, "umount", where)
    shutil.rmtree(folder, ignore_errors=True)


def remove_battery(lan: SimLan, i: int) -> None:
    """Undo `set_battery`: the laptop's own (empty) power_supply again, the fake folder gone."""
    unbind(lan, i, POWER_SUPPLY, supplies(lan, i))


def set_cpu_clock(lan: SimLan, i: int, now_khz: int, max_khz: int) -> None:
    """Laptop `i`'s first core reports a clock (cpufreq), as a laptop's does and this machine's do not: a folder
    bound over its sysfs cpu0 holds cpufreq alone (nothing here reads the rest of cpu0)."""
    folder = lan.state_dir / f"laptop{i}" / "cpu0"
    (folder / "cpufreq").mkdir(parents=True, exist_ok=True)
    for name, value in (("scaling_cur_freq", now_khz), ("cpuinfo_max_freq", max_khz)):
        (folder / "cpufreq" / name).write_text(f"{value}\n")
    for path in (folder, folder / "cpufreq", *(folder / "cpufreq").iterdir()):
        path.chmod(0o755 if path.is_dir() else 0o644)
    if not bound(lan, i, CPU0):
        in_laptop_mounts(lan, i, "mount", "--bind", str(folder), CPU0)


def remove_cpu_clock(lan: SimLan, i: int) -> None:
    unbind(lan, i, CPU0, lan.state_dir / f"laptop{i}" / "cpu0")


def rename_link(lan: SimLan, i: int, name: str) -> None:
    """Laptop `i`'s link renamed inside its namespace ("wlp2s0" for Wi-Fi by systemd's names, "eth0" back). A link
    is renamed only while down, which drops its default route: that is put back."""
    lan_state, laptop, _ = lan.laptop(i)
    current = run("ip", "-n", laptop.netns, "-o", "link", "show").stdout
    old = next(line.split(":")[1].strip().split("@")[0] for line in current.splitlines()
               if "link/ether" in line)
    if old == name:
        return
    run("ip", "-n", laptop.netns, "link", "set", old, "down")
    run("ip", "-n", laptop.netns, "link", "set", old, "name", name)
    run("ip", "-n", laptop.netns, "link", "set", name, "up")
    run("ip", "-n", laptop.netns, "route", "replace", "default", "via", lan_state.gateway)


def give_tool(lan: SimLan, i: int, name: str, script: str | None) -> Path:
    """Put a tool `name` (a shell `script`) first on the PATH of laptop `i`'s logins; None takes the tools away.
    sshd restarts to set the PATH, in a new mount namespace: give tools before a battery. The folder of tools."""
    lan_state, laptop, laptop_dir = lan.laptop(i)
    tools = laptop_dir / "tools"
    tools.mkdir(mode=0o755, exist_ok=True)
    if script is None:
        shutil.rmtree(tools)
    else:
        (tools / name).write_text(script)
        (tools / name).chmod(0o755)
    config = laptop_dir / "sshd_config"
    lines = [line for line in config.read_text().splitlines() if not line.startswith("SetEnv PATH=")]
    setting = [f"SetEnv PATH={tools}:{TOOLS_PATH}"] if script is not None else []
    config.write_text("\n".join([*lines, *setting]) + "\n")
    lan.restart_sshd(lan_state, laptop, laptop_dir)
    lan.save(lan_state)
    return tools
