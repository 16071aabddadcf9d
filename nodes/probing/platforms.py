"""What differs between the systems a laptop runs: Linux, macOS, Windows through WSL2 (native Windows is refused).

The probe (nodes/probing/probe.sh) and the sampler (nodes/metrics/sampler.py) each have one line that hands a Mac to
the shell functions here (`DARWIN`), which answer in the words the Linux paths already print (`meminfo_MemTotal=`,
`MemTotal:` lines, `Net rx tx`), so everything after them is one path for both. The rpc-server's commands work on both
as they are (`PROCESSES`). A Windows laptop joins through WSL2, a Linux of its own that the Linux paths serve; what is
said about it is read here from the probe's answers. Everything else in this module reads answers and says things: no
SSH.
"""

import re

# macOS's own tools, answering as Linux's /proc would. Each tolerates a missing tool (nothing printed for it);
# `missing_tools` names what a Mac lacks, for the probe to say.
DARWIN = r"""
mac_memory() {  # Linux's /proc/meminfo lines: RAM from sysctl, what is free from vm_stat, swap from vm.swapusage
  total=$(sysctl -n hw.memsize 2>/dev/null)
  [ -n "$total" ] && echo "MemTotal: $((total / 1024)) kB"
  vm_stat 2>/dev/null | awk '
    /page size of/ {for (i = 1; i < NF; i++) if ($i == "of") size = $(i + 1)}
    /^Pages (free|inactive|speculative):/ {sub("\\.$", "", $NF); pages += $NF}
    END {if (size) printf "MemAvailable: %.0f kB\n", pages * size / 1024}'
  sysctl -n vm.swapusage 2>/dev/null | awk '
    function kb(v) {n = v + 0; u = substr(v, length(v)); return n * (u == "G" ? 1048576 : u == "M" ? 1024 : 1)}
    {for (i = 1; i < NF; i++) {if ($i == "total") t = kb($(i + 2)); if ($i == "free") f = kb($(i + 2))}}
    END {if (t != "") printf "SwapTotal: %.0f kB\nSwapFree: %.0f kB\n", t, f}'
}
mac_nic() { route -n get default 2>/dev/null | awk '$1 == "interface:" {print $2}'; }
mac_net() {  # "Net rx tx": the bytes of the default route's interface (all but loopback when there is none)
  netstat -ibn 2>/dev/null | awk -v nic="$1" '$3 ~ /^<Link#/ && ($1 == nic || (nic == "" && $1 !~ /^lo/)) {
    rx += $(NF - 4); tx += $(NF - 1)} END {printf "Net %.0f %.0f\n", rx, tx}'
}
mac_power() {  # the probe's on_ac, battery, battery_percent and battery_status (Linux's sysfs words) from pmset
  pmset -g batt 2>/dev/null | awk -F'; *' '
    /drawing from/ {print "on_ac=" (index($0, "AC Power") ? 1 : 0)}
    /InternalBattery/ {p = $1; sub(/%$/, "", p); sub(/.*[^0-9]/, "", p); print "battery=1"; print "battery_percent=" p
      s = $2
      if (s == "charged") s = "Full"; else if (s == "discharging") s = "Discharging"
      else if (s == "charging" || s == "finishing charge") s = "Charging"
      else if (s == "AC attached") s = "Not charging"
      print "battery_status=" s}'
}
mac_thermal() {  # pmset's record of the CPU's speed limit (percent; under 100: throttled) and thermal warnings
  pmset -g therm 2>/dev/null | awk '
    /CPU_Speed_Limit/ {print "cpu_speed_limit=" $NF}
    tolower($0) ~ /thermal warning level/ && match($NF, /^[0-9]+/) {print "thermal_warning=" substr($NF, 1, RLENGTH)}'
}
mac_cpu_flags() {  # Intel: machdep.cpu's names, as Linux spells them; Apple silicon: hw.optional's, likewise
  { sysctl -n machdep.cpu.features machdep.cpu.leaf7_features 2>/dev/null | tr 'A-Z.' 'a-z_' | tr ' ' '\n' |
      sed 's/^avx1_0$/avx/'
    sysctl hw.optional 2>/dev/null | awk -F': ' '$2 == 1 {print $1}' | sed -n \
      -e 's/^hw\.optional\.neon$/asimd/p' -e 's/^hw\.optional\.arm\.FEAT_DotProd$/asimddp/p' \
      -e 's/^hw\.optional\.arm\.FEAT_I8MM$/i8mm/p' -e 's/^hw\.optional\.arm\.FEAT_BF16$/bf16/p' \
      -e 's/^hw\.optional\.arm\.FEAT_FP16$/fphp/p'
  } | tr '\n' ' '
}
darwin_probe() {  # the rest of nodes/probing/probe.sh, for a Mac
  kv distro "macOS $(sw_vers -productVersion 2>/dev/null)"
  kv cpu_model "$(sysctl -n machdep.cpu.brand_string 2>/dev/null)"
  kv physical_cores "$(sysctl -n hw.physicalcpu 2>/dev/null)"
  kv logical_cores "$(sysctl -n hw.logicalcpu 2>/dev/null)"
  kv performance_cores "$(sysctl -n hw.perflevel0.physicalcpu 2>/dev/null)"
  kv cpu_flags "$(mac_cpu_flags)"
  kv cpu_mhz "$(sysctl -n hw.cpufrequency_max 2>/dev/null | awk '{printf "%.0f", $1 / 1000000}')"
  mac_memory | awk '{sub(":", "", $1); print "meminfo_" $1 "=" $2}'
  kv memory_pressure "$(sysctl -n kern.memorystatus_vm_pressure_level 2>/dev/null)"
  kv memory_free_percent "$(sysctl -n kern.memorystatus_level 2>/dev/null)"
  nic=$(mac_nic)
  if [ -n "$nic" ]; then
    kv nic "$nic"
    wifi=$(networksetup -listallhardwareports 2>/dev/null |
      awk '/^Hardware Port: (Wi-Fi|AirPort)$/ {w = 1; next} w && /^Device:/ {print $2; exit}')
    if [ "$nic" = "$wifi" ]; then kv wireless 1; else kv wireless 0; fi
  fi
  mac_power
  mac_thermal
  missing=
  for tool in sysctl vm_stat sw_vers; do command -v "$tool" >/dev/null 2>&1 || missing="$missing $tool"; done
  kv missing_tools "${missing# }"
}
darwin_samples() {  # nodes/metrics/sampler.py's loop, for a Mac; $1: seconds between readings
  nic=$(mac_nic); pause=${1%.*}; [ "${pause:-0}" -ge 1 ] 2>/dev/null || pause=1
  while :; do
    echo "T $(date +%s)"
    mac_memory
    mac_net "$nic"
    mac_power | awk -F= '{v[$1] = $2}
      END {if (v["battery"]) print "Bat " v["battery_percent"] "|" v["battery_status"] "|" v["on_ac"]}'
    # top's second sample is the CPU's busy share over the interval, and waiting for it is the wait between readings.
    if command -v top >/dev/null 2>&1; then
      top -l 2 -n 0 -s "$pause" 2>/dev/null | awk '/^CPU usage:/ {u = $3; s = $5}
        END {if (u != "") {sub("%", "", u); sub("%", "", s); print "CpuBusy " u + s}}'
    else
      sleep "$pause"
    fi
    echo E
  done
}
"""
# Whether a pid is a live ggml-rpc-server: Linux's /proc (a zombie's cmdline is empty, so a server that died and
# is not yet reaped is none); a Mac has no /proc and asks `ps` (a zombie's state starts with Z).
PROCESSES = r"""
is_server() {
  if [ "$(uname -s)" = Darwin ]; then
    ps -p "$1" -o stat= -o command= 2>/dev/null | awk '$1 !~ /^Z/ && /ggml-rpc-server/ {f = 1} END {exit !f}'
  else
    grep -q ggml-rpc-server "/proc/$1/cmdline" 2>/dev/null
  fi
}
"""
# `setsid` is util-linux's; a Mac has none: there the server is detached with nohup (it still outlives the session).
DETACH = "detach=nohup; command -v setsid >/dev/null 2>&1 && detach=setsid"
LOGICAL_CORES = "nproc 2>/dev/null || sysctl -n hw.logicalcpu 2>/dev/null || echo 1"  # macOS has no nproc

PRESSURE = {"1": "normal", "2": "warning", "4": "critical"}  # kern.memorystatus_vm_pressure_level
# What a Mac's probe cannot do without: without them it knows neither its memory nor what is free.
NEEDED_ON_MAC = {"sysctl": "/usr/sbin/sysctl", "vm_stat": "/usr/bin/vm_stat"}
WSL_MEMORY = ("WSL2's virtual machine: by default half of the Windows laptop's RAM; `memory=` under [wsl2] in "
              "%UserProfile%\\.wslconfig sets it (then `wsl --shutdown`)")
# How Windows' own shells say a command is unknown: cmd.exe (its exit status 9009 in any language), PowerShell
# (CommandNotFoundException in any language), `ver`; and a Unix-like shell on Windows (Git Bash, MSYS2, Cygwin).
WINDOWS_SIGNS = re.compile(r"is not recognized as an internal or external command|is not recognized as the name of a "
                           r"cmdlet|CommandNotFoundException|Microsoft Windows \[Version", re.I)
WINDOWS_UNAMES = re.compile(r"^(MINGW|MSYS|CYGWIN)", re.I)


class UnsupportedSystem(Exception):
    """A laptop the panel cannot serve as it is (a native Windows login, a Mac without its own tools), in words."""


def wsl_version(raw: dict) -> int | None:
    """2 for WSL2 (a real Linux kernel of Microsoft's: 5.15.153.1-microsoft-standard-WSL2, or 4.19.x-microsoft-standard
    before it said so), 1 for WSL1 (Windows answering Linux's calls: 4.4.0-19041-Microsoft); None off Windows."""
    said = f"{raw.get('kernel', '')} {raw.get('proc_version', '')}"
    if "microsoft" in said.lower():
        return 2 if re.search(r"WSL2|microsoft-standard", said, re.I) else 1
    return 2 if raw.get("wsl_interop") else None  # WSL2 with a kernel built by its user


def platform_name(raw: dict) -> str:
    """The system as the laptop page says it: "macOS 14.5", "Windows (WSL2) · Ubuntu 22.04.4 LTS", the distro."""
    distro = raw.get("distro", "").strip()
    wsl = wsl_version(raw)
    if wsl:
        return f"Windows (WSL{wsl})" + (f" · {distro}" if distro else "")
    return distro or raw.get("os", "")


def facts(raw: dict) -> dict:
    """The probe's facts that only some systems give; the same keys everywhere (None where not given)."""
    wsl = wsl_version(raw)
    speed_limit = _int(raw.get("cpu_speed_limit"))
    return {
        "platform": platform_name(raw),
        "wsl": wsl,
        "ram_note": WSL_MEMORY if wsl == 2 else "",
        "memory_pressure": PRESSURE.get(raw.get("memory_pressure", "").strip()),
        "memory_free_percent": _int(raw.get("memory_free_percent")),
        "performance_cores": _int(raw.get("performance_cores")),
        "cpu_speed_limit": speed_limit,
        "thermal_warning": _int(raw.get("thermal_warning")),
        "missing_tools": raw.get("missing_tools", "").split(),
    }


def _int(value: str | None) -> int | None:
    value = (value or "").strip()
    return int(value) if value.isascii() and value.isdecimal() else None


def windows_login(output: str, exit_status: int | None = None, os_name: str = "") -> bool:
    """Whether a command's answer is Windows' own shell speaking (or a Unix-like shell on Windows), not a Unix one."""
    return exit_status == 9009 or bool(WINDOWS_SIGNS.search(output)) or bool(WINDOWS_UNAMES.match(os_name))


def windows_refusal(host: str) -> str:
    return (f"{host} is a Windows laptop answering with Windows' own shell (cmd.exe or PowerShell), which cannot run "
            "the panel's commands or its Linux runtime. A Windows laptop joins through WSL2: install WSL2 with Ubuntu "
            "(`wsl --install -d Ubuntu` in an administrator PowerShell), then in Ubuntu `sudo apt install "
            "openssh-server`, and register Ubuntu's SSH server instead (README, \"Macs and Windows laptops\": its "
            "address, port and memory limit).")


def mac_problem(facts: dict) -> str:
    """Why a Mac's probe cannot be used ("" when it can): macOS's own tools missing from the SSH login's PATH."""
    lacking = [tool for tool in NEEDED_ON_MAC if tool in facts.get("missing_tools", [])]
    if facts.get("os") != "Darwin" or not lacking:
        return ""
    where = ", ".join(NEEDED_ON_MAC[tool] for tool in lacking)
    return (f"This Mac does not answer `{'` or `'.join(lacking)}`, part of macOS itself ({where}): without them the "
            "panel cannot tell its memory. Check that the SSH login's PATH includes /usr/sbin and /usr/bin (a shell "
            "profile on the Mac may have replaced it), then probe again.")


def no_bundle_for(facts: dict) -> str:
    """Why the bundle (built for Linux) does not run on this system, in words."""
    if facts.get("os") == "Darwin":
        return (f"it runs {facts.get('distro') or 'macOS'}, and there is no macOS bundle (the runtime is built for "
                "Linux); a Mac builds its own, with Metal on Apple silicon, once the Xcode command line tools and "
                "cmake are there")
    if facts.get("wsl") == 1:
        return ("it runs WSL 1, which has no Linux kernel of its own; convert it to WSL2 in PowerShell: "
                "`wsl --set-version <distribution> 2` (`wsl -l -v` lists them)")
    return f"it runs {facts.get('os') or 'an unknown OS'}; the runtime is built for Linux"
