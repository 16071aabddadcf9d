"""Once-a-second readings of a laptop's /proc, streamed over one SSH channel, turned into samples.

No agent is installed: the laptop runs a small shell loop (`SCRIPT`) that
prints raw counters between `T <time>` and `E`; `Sampler` turns two successive
readings into rates (CPU %, network bytes/s, the share of time a CPU limit held
the laptop back), and reads its battery and CPU clock (nodes/probing/power.py). A Mac
has no /proc: its loop (nodes/probing/platforms.py) prints the same lines from its own
tools, and its CPU's busy share as `CpuBusy` (macOS gives no per-core counters
to a shell).
"""

from dataclasses import dataclass, field

from nodes.probing import platforms, power

# $1: seconds between readings. Reads a cgroup memory limit too (a laptop made smaller by one).
SCRIPT = platforms.DARWIN + r"""
[ "$(uname -s)" = Darwin ] && { darwin_samples "$1"; exit; }
group=$(awk -F: '$2 ~ /(^|,)memory(,|$)/ {print $3}' /proc/self/cgroup 2>/dev/null)
limit="/sys/fs/cgroup/memory$group/memory.limit_in_bytes"
usage="/sys/fs/cgroup/memory$group/memory.usage_in_bytes"
# The laptop's cpu cgroup's counters: how long a CPU limit held it back (v2, then v1).
cpustat="/sys/fs/cgroup$(awk -F: '$1 == "0" {print $3}' /proc/self/cgroup 2>/dev/null)/cpu.stat"
[ -r "$cpustat" ] && grep -q '^throttled_usec' "$cpustat" || \
  cpustat="/sys/fs/cgroup/cpu$(awk -F: '$2 ~ /(^|,)cpu(,|$)/ {print $3}' /proc/self/cgroup 2>/dev/null)/cpu.stat"
nic=$(ip route show default 2>/dev/null | awk '{for (i = 1; i < NF; i++) if ($i == "dev") {print $(i + 1); exit}}')
[ -z "$nic" ] && nic=$(ip -o addr show 2>/dev/null | awk -v a="$(echo "$SSH_CONNECTION" | cut -d' ' -f3)" \
  'a != "" {split($4, p, "/"); if (p[1] == a) {print $2; exit}}')
# Whether a glob matched a file: what a laptop does not have costs it no process each second.
present() { [ -e "$1" ]; }
# Each reading starts four processes (sleep, date, grep, awk), not twenty: the laptop's other readings are read by
# the shell itself, or only where the laptop has them (a thermal zone, cpufreq, a battery).
while :; do
  # The pause runs beside the readings, so a busy laptop's slow readings do not stretch the period past $1.
  sleep "$1" & pause=$!
  echo "T $(date +%s.%N)"
  grep -h -E '^(cpu|(MemTotal|MemAvailable|SwapTotal|SwapFree):)' /proc/stat /proc/meminfo
  [ -r "$limit" ] && { read -r cg_limit < "$limit" && read -r cg_usage < "$usage"; } 2>/dev/null &&
    echo "CgLimit $cg_limit $cg_usage"
  awk -v nic="$nic" 'FNR == NR {if (FNR > 2) {gsub(":", " "); if ($1 == nic || (nic == "" && $1 != "lo")) {
      rx += $2; tx += $10}}; next}
    /^cpu MHz/ {split($0, f, ": "); s += f[2]; n++}
    END {printf "Net %.0f %.0f\n", rx, tx; if (n) printf "MHz %.0f\n", s / n}' /proc/net/dev /proc/cpuinfo
  present /sys/class/thermal/thermal_zone*/temp &&
    t=$(cat /sys/class/thermal/thermal_zone*/temp 2>/dev/null | sort -n | tail -1) && [ -n "$t" ] && echo "Temp $t"
  [ -r "$cpustat" ] && while read -r key value; do
    case "$key $value" in
      "throttled_time "*[!0-9]*|"throttled_usec "*[!0-9]*) ;;
      "throttled_time "?*) echo "Thr $value" ;;
      "throttled_usec 0") echo "Thr 0" ;;
      "throttled_usec "?*) echo "Thr ${value}000" ;;
    esac
  done 2>/dev/null < "$cpustat"
  # "-" for what the laptop does not say; the top of its fastest core, as the probe takes (big.LITTLE boards).
  now= top=
  present /sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_cur_freq && now=$(awk '{s += $1; n++}
    END {if (n) printf "%.0f", s / n}' /sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_cur_freq 2>/dev/null)
  present /sys/devices/system/cpu/cpu[0-9]*/cpufreq/cpuinfo_max_freq && top=$(awk '$1 > m {m = $1}
    END {if (m) print m}' /sys/devices/system/cpu/cpu[0-9]*/cpufreq/cpuinfo_max_freq 2>/dev/null)
  printf 'Freq %s %s\n' "${now:--}" "${top:--}"
  cap= status= ac= found=
  for supply in /sys/class/power_supply/*; do
    present "$supply" || continue  # none: the pattern itself
    [ "$(cat "$supply/scope" 2>/dev/null)" = Device ] && continue  # a wireless mouse's own battery
    case "$(cat "$supply/type" 2>/dev/null)" in
      Battery) found=1; cap=$(head -n 1 "$supply/capacity" 2>/dev/null | cut -c 1-20)
               status=$(head -n 1 "$supply/status" 2>/dev/null | cut -c 1-20) ;;
      Mains) ac=$(cat "$supply/online" 2>/dev/null) ;;
    esac
  done
  [ -n "$found" ] && echo "Bat $cap|$status|$ac"
  echo E
  wait "$pause"
done
"""
HUGE = 2**60


@dataclass
class Reading:
    time: float = 0.0
    cpu: list[list[int]] = field(default_factory=list)  # [total, per core...] as /proc/stat jiffies
    mem: dict[str, int] = field(default_factory=dict)
    cgroup: tuple[int, int] | None = None
    net: tuple[int, int] = (0, 0)
    mhz: int | None = None
    temp_mc: int | None = None
    throttled_ns: int | None = None  # the cpu cgroup's throttled time, summed since it was made
    khz: tuple[int | None, int | None] = (None, None)  # the CPU's clock now, at most
    battery: tuple[str, str, str] | None = None  # capacity, status, mains online, as sysfs says them
    cpu_busy: float | None = None  # a Mac's: the busy share over the last interval itself


def parse_block(lines: list[str]) -> Reading:
    reading = Reading()
    for line in lines:
        try:
            read_line(reading, line.split())
        except (ValueError, IndexError):
            continue  # one odd line must not stop a laptop's stream
    return reading


def read_line(reading: Reading, parts: list[str]) -> None:
    key = parts[0] if parts else ""
    if key == "T":
        reading.time = float(parts[1]) if "N" not in parts[1] else float(parts[1].split(".")[0])
    elif key.startswith("cpu"):
        reading.cpu.append([int(x) for x in parts[1:9]])
    elif key.endswith(":"):
        reading.mem[key[:-1]] = int(parts[1]) * 1024
    elif key == "CgLimit":
        reading.cgroup = (int(parts[1]), int(parts[2]))
    elif key == "Net":
        reading.net = (int(float(parts[1])), int(float(parts[2])))
    elif key == "MHz":
        reading.mhz = int(parts[1])
    elif key == "Temp":
        reading.temp_mc = int(parts[1])
    elif key == "Thr":
        reading.throttled_ns = int(parts[1])
    elif key == "Freq":
        now, top = (parts[1:] + ["-", "-"])[:2]
        reading.khz = (int(now) if now != "-" else None, int(top) if top != "-" else None)
    elif key == "Bat":
        capacity, status, on_ac = (" ".join(parts[1:]).split("|") + ["", ""])[:3]
        reading.battery = (capacity, status, on_ac)
    elif key == "CpuBusy":
        reading.cpu_busy = round(float(parts[1]), 1)


def busy_percent(before: list[int], after: list[int]) -> float:
    """CPU busy share between two /proc/stat lines (idle and iowait count as idle)."""
    total = sum(after) - sum(before)
    idle = (after[3] + after[4]) - (before[3] + before[4])
    return round(100 * (total - idle) / total, 1) if total > 0 else 0.0


def memory(reading: Reading) -> dict:
    total, available = reading.mem.get("MemTotal", 0), reading.mem.get("MemAvailable", 0)
    if reading.cgroup and reading.cgroup[0] < min(total, HUGE):
        limit, used = reading.cgroup
        total, available = limit, max(limit - used, 0)
    swap_total = reading.mem.get("SwapTotal", 0)
    return {"ram_total": total, "ram_used": total - available, "ram_available": available,
            "swap_used": swap_total - reading.mem.get("SwapFree", swap_total)}


def cpu_percent(before: Reading, after: Reading) -> float:
    if after.cpu_busy is not None:
        return after.cpu_busy
    return busy_percent(before.cpu[0], after.cpu[0]) if before.cpu and after.cpu else 0.0


def sample(before: Reading, after: Reading) -> dict:
    seconds = max(after.time - before.time, 1e-3)
    cores = [busy_percent(b, a) for b, a in zip(before.cpu[1:], after.cpu[1:], strict=False)]
    return {
        "t": round(after.time, 3),
        "cpu": cpu_percent(before, after),
        "cores": cores,
        **memory(after),
        "rx": max(round((after.net[0] - before.net[0]) / seconds), 0),
        "tx": max(round((after.net[1] - before.net[1]) / seconds), 0),
        "mhz": after.mhz,
        "temp": after.temp_mc / 1000 if after.temp_mc else None,
        **laptop_power(before, after),
    }


def laptop_power(before: Reading, after: Reading) -> dict:
    """Battery, the CPU's clock against its top and the share of time a CPU limit held the laptop back."""
    times = [(round(reading.time * 1e9), reading.throttled_ns) if reading.throttled_ns is not None else None
             for reading in (before, after)]
    battery = power.battery(*after.battery) if after.battery else None
    return {"battery": {"state": battery.state, "percent": battery.percent, "note": battery.note} if battery else None,
            "cpu_khz": after.khz[0], "cpu_khz_max": after.khz[1],
            "throttled": power.throttled_share(*times)}


class Sampler:
    """Feed it the script's lines; it hands back a sample after each complete reading but the first."""

    def __init__(self) -> None:
        self.block: list[str] = []
        self.previous: Reading | None = None

    def feed(self, line: str) -> dict | None:
        if line != "E":
            self.block.append(line)
            return None
        reading, self.block = parse_block(self.block), []
        previous, self.previous = self.previous, reading
        return sample(previous, reading) if previous else None
