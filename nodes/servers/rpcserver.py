"""ggml-rpc-server on a laptop: started detached (it outlives the SSH session), with a pidfile and a log.

Layout on the laptop, under the install folder:
  runtime/current/bin/ggml-rpc-server   the runtime (nodes/runtime/install.py)
  runtime/current/gpu/libggml-*.so       its GPU backends, loaded only by a server that uses a GPU
  rpc/<port>/pid, rpc/<port>/log         one server per port (a server serves one client at a time)
  cache/rpc/                             its tensor cache (-c), shared by all its servers
"""

import time
from dataclasses import dataclass

from nodes.probing import platforms
from nodes.remote import ssh

START = platforms.PROCESSES + """
dir="$1"; bin="$2"; host="$3"; port="$4"; threads="$5"; cache="$6"; spin="$7"; devices="$8"; gpu="$9"
mkdir -p -- "$dir" "$cache" || exit 3
pid=$(cat "$dir/pid" 2>/dev/null)
case "$pid" in ''|*[!0-9]*) ;; *) if kill -0 "$pid" 2>/dev/null; then echo "running $pid"; exit 0; fi ;; esac
[ -x "$bin" ] || { echo "no runtime at $bin" >&2; exit 4; }
[ -w "$dir" ] || { echo "$dir on the laptop is not writable by $(id -un)" >&2; exit 5; }
[ -f "$dir/log" ] && mv -- "$dir/log" "$dir/log.1"
rm -f -- "$dir/pid" "$dir/pid.new"
if [ "$spin" -gt 0 ]; then export GOMP_SPINCOUNT="$spin"; else unset GOMP_SPINCOUNT; fi
# The bundle's GPU backend, loaded by this server only (a runtime built on the laptop has its backends inside).
unset GGML_BACKEND_PATH
if [ -n "$gpu" ] && [ -f "$gpu" ]; then export GGML_BACKEND_PATH="$gpu"; fi
# Keep the laptop awake while it serves: the inhibitor runs the shell that waits for the server, so it lets go
# when the server ends. systemd-inhibit needs logind; where it cannot inhibit, the server runs without. Said on
# stderr: stdout's last words stay the pid. $keep is left unquoted to split into its words.
keep=
if command -v systemd-inhibit >/dev/null 2>&1; then
  # A hung logind would hold the trial for sd-bus's 25 s, past the panel's wait for START: 5 s, then asleep.
  if command -v timeout >/dev/null 2>&1; then trial="timeout 5"; else trial=; fi
  if said=$($trial systemd-inhibit --what=sleep:idle --who=clusterpanel --why=check --mode=block true 2>&1); then
    keep="systemd-inhibit --what=sleep:idle --who=clusterpanel --why=serving-model-layers --mode=block"
    echo "awake by systemd-inhibit" >&2
  else
    echo "asleep: systemd-inhibit refused ($(echo "$said" | head -n 1 | cut -c 1-120))" >&2
  fi
elif [ "$(uname -s)" = Darwin ] && command -v caffeinate >/dev/null 2>&1; then  # not Linux's caffeine-ng
  keep="caffeinate -i -s"; echo "awake by caffeinate" >&2
else
  echo "asleep: neither systemd-inhibit nor caffeinate is on the laptop" >&2
fi
# A small shell stays as the server's parent to write down how it ended. The pidfile appears whole
# (written aside, then renamed), so a reader never sees it half written.
__DETACH__
LLAMA_CACHE="$cache" PIDFILE="$dir/pid" $detach $keep sh -c \
  '"$0" "$@" & echo $! > "$PIDFILE.new" && mv "$PIDFILE.new" "$PIDFILE"; wait $!
   echo "ggml-rpc-server exited with status $?"' \
  "$bin" -H "$host" -p "$port" -t "$threads" -d "$devices" -c > "$dir/log" 2>&1 < /dev/null &
for _ in 1 2 3 4 5 6 7 8 9 10; do [ -s "$dir/pid" ] && break; sleep 0.1; done
# A laptop too busy to have written the pid within a second: "starting", the pid is learnt later.
pid=$(cat "$dir/pid" 2>/dev/null)
case "$pid" in ''|*[!0-9]*) echo starting ;; *) echo "started $pid" ;; esac
""".replace("__DETACH__", platforms.DETACH)
STOP = platforms.PROCESSES + """
dir="$1"; pid=$(cat "$dir/pid" 2>/dev/null) || exit 0
case "$pid" in ''|*[!0-9]*) rm -f "$dir/pid"; exit 0 ;; esac
if is_server "$pid"; then
  kill "$pid"; for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  kill -9 "$pid" 2>/dev/null
fi
rm -f "$dir/pid"
"""
STATUS = platforms.PROCESSES + """
dir="$1"; pid=$(cat "$dir/pid" 2>/dev/null)
case "$pid" in ''|*[!0-9]*) pid= ;; esac
if [ -n "$pid" ] && is_server "$pid"; then
  echo "running $pid"
else
  echo stopped
fi
tail -n "$2" -- "$dir/log" 2>/dev/null
"""


EXITED = "ggml-rpc-server exited with status "


def quick_s() -> float:
    """How long each of these commands may take (settings.LAPTOP_QUICK_COMMAND_S, 15 s): one answers at once on
    a laptop that works (STOP waits 2 s at most for the server to go); a laptop that takes longer hangs, and the
    supervisor should say so and try again, not wait a minute."""
    from django.conf import settings

    return float(settings.LAPTOP_QUICK_COMMAND_S)


# How long a stopped server's exit status may take to reach its log, where why it stopped matters (a job's
# error names it): 1 s was too short on a loaded machine, and a server killed by hand read as "no exit status
# recorded". Elsewhere 1 s: the supervisor asks of each server every round, one starting among them.
LAST_WORDS_S = 5.0


class RpcServerError(Exception):
    pass


@dataclass(frozen=True)
class Started:
    pid: int | None  # None: the laptop has not written it yet
    awake: str  # "kept awake by systemd-inhibit", "cannot keep awake: …"; "" for a server found running


def awake_in(lines: list[str]) -> str:
    """Whether START could keep the laptop awake, in words."""
    for line in lines:
        if line.startswith("awake by "):
            return f"kept awake by {line.removeprefix('awake by ')}"
        if line.startswith("asleep: "):
            return f"cannot keep awake: {line.removeprefix('asleep: ')}"
    return ""


@dataclass(frozen=True)
class ServerState:
    running: bool
    pid: int | None
    log_tail: str


def why_it_ended(log_tail: str) -> str:
    """The last words of a server, in plain language."""
    lines = log_tail.splitlines()
    unknown = next((line.rpartition(":")[2].strip() for line in lines if line.startswith("error: unknown device:")), "")
    if unknown:
        listed = sorted((line.split(":", 1)[0].strip() for line in lines if line.startswith("  ") and ":" in line),
                        key=lambda name: name == "CPU")  # the panel's order: GPUs, then the CPU
        return (f"its device {unknown} is no longer there (the laptop now has: {', '.join(listed) or 'none'}); "
                "probe the laptop and plan again")
    for line in reversed(lines):
        if line.startswith(EXITED) and line.rsplit(" ", 1)[1].isdigit():
            code = int(line.rsplit(" ", 1)[1])
            if code == 137:
                return "killed (signal 9): by hand, or by the kernel when the laptop ran out of memory"
            if code > 128:
                return f"stopped by signal {code - 128}"
            return f"exited with status {code}"
    return "it is no longer running (no exit status recorded)"


def folder(install_dir: str, port: int) -> str:
    return ssh.remote_path(f"{install_dir.rstrip('/')}/rpc/{port}")


def gpu_backend(install_dir: str, devices: list[str]) -> str:
    """The GPU backend library a server serving `devices` must load ("" for the CPU alone): the bundle's
    Vulkan backend for Vulkan devices; a runtime built on the laptop has its backends beside the binary."""
    if any(name.startswith("Vulkan") for name in devices):
        return f"{install_dir.rstrip('/')}/runtime/current/gpu/libggml-vulkan.so"
    return ""


def start(target: ssh.SSHTarget, install_dir: str, port: int, bind: str = "127.0.0.1", threads: int = 0,
          spin_count: int | None = None, devices: list[str] | None = None) -> Started:
    """Start (or find running) the server on `port`: its pid, or None when the laptop has not written it yet
    (the supervisor learns it from `state()` later), and whether the laptop is kept awake while it serves (held
    by systemd-inhibit or caffeinate, let go when the server ends). threads=0: one per logical core.
    spin_count: its OpenMP threads' GOMP_SPINCOUNT (settings.RPC_SPIN_COUNT when None; 0: libgomp's default).
    devices: the laptop's devices it serves, in order (the head sees each as an RPC device); None: the CPU."""
    from django.conf import settings

    spin_count = settings.RPC_SPIN_COUNT if spin_count is None else spin_count
    base = install_dir.rstrip("/")
    binary = ssh.remote_path(f"{base}/runtime/current/bin/ggml-rpc-server")
    threads = threads or int(ssh.sh(target, platforms.LOGICAL_CORES, timeout=quick_s()).stdout.strip() or 1)
    devices = devices or ["CPU"]
    gpu = gpu_backend(install_dir, devices)
    result = ssh.sh(target, START, folder(install_dir, port), binary, bind, str(port), str(threads),
                    ssh.remote_path(f"{base}/cache"), str(int(spin_count)), ",".join(devices),
                    ssh.remote_path(gpu) if gpu else "", timeout=quick_s())
    if result.exit_status == 4:
        raise RpcServerError("The runtime is not installed on this laptop yet; install it first.")
    if result.exit_status != 0 or not result.stdout.split():
        raise RpcServerError(f"Could not start ggml-rpc-server: {result.stderr.strip() or result.stdout.strip()}")
    return Started(pid_in(result.stdout.split()), awake_in(result.stderr.splitlines()))


def pid_in(words: list[str]) -> int | None:
    """The pid in the last words of START or STATUS ("started 123", "running 123"); None for "starting"."""
    return int(words[-1]) if len(words) >= 2 and words[-1].isdigit() else None


def stop(target: ssh.SSHTarget, install_dir: str, port: int) -> None:
    ssh.sh(target, STOP, folder(install_dir, port), timeout=quick_s())


def state(target: ssh.SSHTarget, install_dir: str, port: int, log_lines: int = 20,
          last_words_s: float = 1.0) -> ServerState:
    """Running or not; a stopped server's state waits a moment for its last words (the shell that started
    it writes the exit status just after the server is gone: on a loaded laptop, over a second later)."""
    deadline, pause = time.monotonic() + last_words_s, 0.1
    while True:
        lines = ssh.sh(target, STATUS, folder(install_dir, port), str(log_lines), timeout=quick_s()).stdout.splitlines()
        first = lines[0].split() if lines else ["stopped"]
        pid = pid_in(first) if first[:1] == ["running"] else None
        found = ServerState(pid is not None, pid, "\n".join(lines[1:]))
        if found.running or EXITED in found.log_tail or not found.log_tail or time.monotonic() > deadline:
            return found
        time.sleep(pause)
        pause = min(pause * 2, 0.5)
