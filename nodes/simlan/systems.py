"""Simulated laptops of other systems: a Mac, Windows through WSL2, a native Windows login, on the simulated LAN.

What is faked, and why: no Mac or Windows machine can run here, so a simulated laptop (a Linux namespace with its own
sshd, nodes/simlan/lan.py) is given shims, small scripts that print what the real tools print on such a machine,
recorded in a file (`$ command` lines, each followed by its output; tests/nodes/fixtures/platforms/). A Mac's SSH
sessions get a PATH of those shims and the rest of the system's tools, less those a Mac does not have (`setsid`,
`nproc`...): the panel's probe, sampler and rpc-server commands then run their macOS paths for real, over SSH, with
the real shell, awk and ps; only the tools' answers are recorded ones (and `caffeinate` runs its command without
holding anything awake). A WSL2 laptop's `uname` says Microsoft's
kernel (its /proc/version cannot be changed; the probe's reading of it is checked on the recorded text). A native
Windows login's shell is a script that answers every command as cmd.exe does: not recognised.
"""

import os
import shlex
import subprocess
from pathlib import Path

from nodes.simlan.lan import SimLan

SYSTEM_PATH = ["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"]
NOT_ON_A_MAC = {"setsid", "nproc", "ldconfig", "ip", "systemd-inhibit", "systemctl", "free", "vmstat", "lscpu"}
# caffeinate runs its command and holds the Mac awake while it runs; here it runs the command.
CAFFEINATE = """#!/bin/sh
# caffeinate, as recorded in words (nodes/simlan/systems.py): its options, then the command it keeps the Mac awake for.
while [ $# -gt 0 ]; do case "$1" in -t|-w) shift 2 ;; -*) shift ;; *) break ;; esac; done
[ $# -gt 0 ] && exec "$@"
exec sleep 2147483647
"""
CMD_EXE = """#!/bin/sh
# cmd.exe, as Windows' OpenSSH server runs it for a command: `cmd.exe /c COMMAND` (nodes/simlan/systems.py).
word=$(printf '%s' "$2" | awk '{print $1}')
printf "'%s' is not recognized as an internal or external command,\\r\\noperable program or batch file.\\r\\n" \\
  "${word:-$1}" >&2
exit 1
"""


def recorded(path: Path) -> dict[str, str]:
    """Each command of a recording file and what it printed."""
    found: dict[str, str] = {}
    command = None
    for line in path.read_text().splitlines():
        if line.startswith("$ "):
            command = line[2:].strip()
            found[command] = ""
        elif command is not None:
            found[command] += line + "\n"
    return found


def tool_shim(tool: str, outputs: dict[str, str]) -> str:
    """A script answering `tool ARGS` with the recorded output for those arguments (a `*` in them: any word)."""
    lines = ["#!/bin/sh", f"# {tool} as recorded (nodes/simlan/systems.py)"]
    if tool == "top":  # `top -l 2 -s N` takes N seconds to give its second sample
        lines.append('for a; do [ "$prev" = -s ] && sleep "$a"; prev=$a; done')
    lines.append('case "$*" in')
    for command, output in outputs.items():
        args = command.split(" ", 1)[1] if " " in command else ""
        pattern = "*".join(shlex.quote(part) for part in args.split("*"))
        lines.append(f"  {pattern or chr(39) * 2}) printf '%s' {shlex.quote(output)} ;;")
    lines += [f'  *) echo "{tool}: this recording has no answer for: $*" >&2; exit 1 ;;', "esac", ""]
    return "\n".join(lines)


def sysctl_shim(outputs: dict[str, str]) -> str:
    """sysctl's answers, one recorded `name: value` line each: several names, -n, a prefix (hw.optional)."""
    values = "".join(outputs.values())
    return f"""#!/bin/sh
# sysctl as recorded (nodes/simlan/systems.py)
values={shlex.quote(values)}
bare=0; status=0
for name in "$@"; do
  case "$name" in -n) bare=1; continue ;; -*) continue ;; esac
  printf '%s' "$values" | awk -v k="$name" -v bare="$bare" \\
    'index($0, k ": ") == 1 || index($0, k ".") == 1 {{if (bare) sub(/^[^:]*: /, ""); print; f = 1}} END {{exit !f}}' ||
    {{ echo "sysctl: unknown oid '$name'" >&2; status=1; }}
done
exit $status
"""


def write_bin(folder: Path, recording: Path, tools: list[str] | None = None, hidden: set[str] = frozenset(),
              without: tuple[str, ...] = ()) -> Path:
    """A folder for a session's PATH: shims for the recording's tools (or `tools` of them), and links to this
    system's own tools but `hidden` ones and those `without` (a machine that lacks them)."""
    folder.mkdir(parents=True, exist_ok=True)
    by_tool: dict[str, dict[str, str]] = {}
    for command, output in recorded(recording).items():
        by_tool.setdefault(command.split()[0], {})[command] = output
    for tool, outputs in by_tool.items():
        if (tools is None or tool in tools) and tool not in without:
            shim = folder / tool
            shim.write_text(sysctl_shim(outputs) if tool == "sysctl" else tool_shim(tool, outputs))
            shim.chmod(0o755)
    for directory in SYSTEM_PATH:
        for entry in sorted(Path(directory).iterdir()) if Path(directory).is_dir() else []:
            link = folder / entry.name
            if entry.name not in hidden | set(without) and not link.exists() and not link.is_symlink():
                link.symlink_to(entry)
    os.chmod(folder, 0o755)
    return folder


def session_path(harness: SimLan, i: int, path: str) -> None:
    """Laptop `i`'s SSH sessions get this PATH (sshd's SetEnv overrides its default); sshd restarts to read it."""
    lan, laptop, laptop_dir = harness.laptop(i)
    config = laptop_dir / "sshd_config"
    lines = [line for line in config.read_text().splitlines() if not line.startswith("SetEnv PATH=")]
    config.write_text("\n".join([*lines, f"SetEnv PATH={path}"]) + "\n")
    harness.restart_sshd(lan, laptop, laptop_dir)
    harness.save(lan)


def make_mac(harness: SimLan, i: int, recording: Path, without: tuple[str, ...] = ()) -> None:
    """Laptop `i` answers as the Mac of `recording` (`without`: tools this Mac lacks, e.g. vm_stat)."""
    _, _, laptop_dir = harness.laptop(i)
    folder = write_bin(laptop_dir / "macos-bin", recording, hidden=NOT_ON_A_MAC, without=without)
    (folder / "caffeinate").write_text(CAFFEINATE)
    (folder / "caffeinate").chmod(0o755)
    session_path(harness, i, str(folder))


def make_wsl2(harness: SimLan, i: int, recording: Path) -> None:
    """Laptop `i`'s kernel is WSL2's (its `uname`); everything else is its own Linux, as in WSL2."""
    _, _, laptop_dir = harness.laptop(i)
    folder = write_bin(laptop_dir / "wsl-bin", recording, tools=["uname"])
    session_path(harness, i, str(folder))


def make_windows(harness: SimLan, i: int) -> None:
    """Laptop `i`'s login shell answers as Windows' cmd.exe: its OpenSSH server logs in, nothing Unix runs."""
    lan, laptop, laptop_dir = harness.laptop(i)
    shell = laptop_dir / "cmd.exe"
    shell.write_text(CMD_EXE)
    shell.chmod(0o755)
    subprocess.run(["usermod", "--shell", str(shell), laptop.user], check=True, capture_output=True)
