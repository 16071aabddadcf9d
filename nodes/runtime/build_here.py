"""Build ggml-rpc-server on the laptop itself, from the head's own llama.cpp source, for a laptop the bundle
cannot serve (macOS, another CPU architecture, a GPU toolkit of its own).

Layout on the laptop, under the install folder:
  downloads/llama-rpc-source-<sha>.tar.gz   the source (nodes/runtime/rpcsource.py), copied once, checked by sha256
  runtime/.build-<key>/                     a build under way: its pid, the unpacked source, CMake's folder
  runtime/built-<key>/bin/                  a finished build: the server and its libraries, files.sha256
  runtime/build-<key>.log                   the last build's whole log
  runtime/current -> built-<key>            switched only once the build answers with the head's RPC protocol
A build folder appears whole or not at all (renamed at the end); a build that fails, is killed or loses its SSH
connection removes its own folder, and a folder left by one killed outright (SIGKILL) is swept away later.
"""

import re
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from nodes.probing import devices
from nodes.remote import ssh
from nodes.remote.transfer import push_verified
from nodes.runtime import buildplan, rpcsource, toolchain
from nodes.runtime.bundle import RuntimeNotFound, find_bundle

Report = Callable[..., None]
BUILD = r"""
runtime="$1"; key="$2"; tarball="$3"; jobs="$4"; protocol="$5"; generator="$6"; target="$7"; shift 7
PATH="$PATH:__EXTRA__"; export PATH
work="$runtime/.build-$key"; final="$runtime/built-$key"; log="$runtime/build-$key.log"; step=prepare
mkdir -p -- "$runtime" || { echo "@@failed prepare"; exit 1; }
if ! mkdir -- "$work" 2>/dev/null; then
  pid=$(cat "$work/pid" 2>/dev/null)
  case "$pid" in ''|*[!0-9]*) ;; *) if kill -0 "$pid" 2>/dev/null; then echo "@@busy $pid"; exit 1; fi ;; esac
  rm -rf -- "$work" && mkdir -- "$work" || { echo "@@failed prepare"; exit 1; }
fi
echo $$ > "$work/pid"; : > "$log"
# On any failure, signal or lost connection: end the whole build (this session's process group), remove its folder.
finish() {
  status=$?; trap - EXIT
  if [ "$status" -ne 0 ]; then trap '' TERM HUP INT PIPE; kill -TERM 0 2>/dev/null; echo "@@failed $step"; fi
  rm -rf -- "$work" 2>/dev/null || { sleep 1; rm -rf -- "$work"; }
  exit "$status"
}
trap finish EXIT; trap 'exit 129' HUP; trap 'exit 130' INT; trap 'exit 143' TERM; trap 'exit 141' PIPE
(while sleep 10; do echo "@@alive" || exit; done) &
# A step's output goes to the log and to the panel; the shell waits in `wait`, which a signal interrupts at once.
run_step() {
  step="$1"; shift; echo "@@step $step"; printf '\n$ %s\n' "$*" >> "$log"; rm -f -- "$work/rc"
  { "$@" 2>&1; echo "$?" > "$work/rc"; } | tee -a "$log" &
  wait $!
  [ "$(cat "$work/rc" 2>/dev/null)" = 0 ] || exit 1
}
run_step unpack tar xzf "$tarball" -C "$work"
run_step configure cmake -S "$work/llama-rpc-source" -B "$work/build" -G "$generator" "$@"
run_step build cmake --build "$work/build" --parallel "$jobs" --target "$target"
mkdir -p -- "$work/stage/bin" && cp -RP "$work/build/bin/$target" "$work/build/bin/"lib* "$work/stage/bin/" || exit 1
run_step check "$work/stage/bin/$target" --list-devices
printf 'rpc-protocol\t%s\n' "$protocol" > "$work/expected"
grep -qxF -f "$work/expected" "$log" ||
  { echo "it does not speak the head's RPC protocol $protocol" | tee -a "$log"; exit 1; }
(cd "$work/stage" && find bin -type f | sort | while read -r f; do sha256sum -- "$f" 2>/dev/null ||
  shasum -a 256 -- "$f"; done > files.sha256 && printf '%s\n' "$@" > cmake-args) || exit 1
rm -rf -- "$final" && mv -- "$work/stage" "$final" || exit 1
step=done; trap - EXIT; trap '' TERM; kill -TERM 0 2>/dev/null; rm -rf -- "$work"; echo "@@built $final"
""".replace("__EXTRA__", toolchain.EXTRA_PATH)
# Exit 0: the build is there with every file as it was made; 4: there is none.
INTACT = ('cd -- "$1" 2>/dev/null || exit 4; if command -v sha256sum >/dev/null 2>&1; '
          'then sha256sum -c --status files.sha256; else shasum -a 256 -c -s files.sha256; fi')
SWITCH = 'ln -sfn -- "$2" "$1/current"'
# Folders of builds whose process is gone (killed outright, or a laptop that restarted mid-build).
SWEEP = """for work in "$1"/.build-*; do [ -d "$work" ] || continue; pid=$(cat "$work/pid" 2>/dev/null)
case "$pid" in ''|*[!0-9]*) rm -rf -- "$work" ;; *) kill -0 "$pid" 2>/dev/null || rm -rf -- "$work" ;; esac; done"""
STEP = re.compile(r"^\[(\d+)/(\d+)\]")  # ninja: [12/40]
PERCENT = re.compile(r"^\[\s*(\d+)%\]")  # make: [ 30%]
STEP_WORDS = {"prepare": "preparing", "unpack": "unpacking the source", "configure": "configuring (CMake)",
              "build": "compiling", "check": "checking the built server", "done": "installing it"}
IDLE_S = 60.0  # the build prints "@@alive" every 10 s, even through a long compile
REPORT_EVERY_S = 0.5


class BuildRefused(Exception):
    """Nothing was done: the laptop lacks a tool, or a build is already running there."""


class BuildFailed(Exception):
    def __init__(self, step: str, message: str) -> None:
        super().__init__(message)
        self.step = step


@dataclass(frozen=True)
class Built:
    path: str
    plan: buildplan.BuildPlan
    tools: toolchain.Toolchain
    rebuilt: bool
    seconds: float
    sent: int
    devices: list[devices.Device]
    protocol: str
    log: str


def consequences(install_dir: str) -> list[str]:
    """What "Build the runtime here" does, said before it starts."""
    return [
        "The laptop compiles ggml and ggml-rpc-server from the head's own llama.cpp source (copied once, under "
        "2 MiB, checked by sha256): a few minutes on every core it has, longer with CUDA.",
        "It needs a C/C++ compiler, cmake and make or ninja (and a GPU's toolkit to use the GPU); if one is "
        "missing, nothing is copied and the panel says how to install it.",
        f"The build runs in a folder of its own under {install_dir.rstrip('/')}/runtime/. Only a build that "
        "answers with the head's RPC protocol becomes the laptop's runtime; a failed or interrupted one leaves "
        "the current runtime as it is.",
        "rpc-servers running now keep their runtime until they restart. Building again with the same tools "
        "rebuilds nothing.",
    ]


def read_log(target: ssh.SSHTarget, path: str, lines: int = 2000) -> str:
    return ssh.sh(target, 'tail -n "$2" -- "$1" 2>/dev/null', ssh.remote_path(path), str(lines)).stdout


def head_protocol() -> str:
    """The RPC protocol the head speaks: its bundle's (built with it), else that of the source it was built from."""
    try:
        return find_bundle().rpc_protocol
    except RuntimeNotFound:
        return rpcsource.tarball().rpc_protocol


def build_runtime(target: ssh.SSHTarget, install_dir: str, protocol: str, report: Report) -> Built:
    """The laptop's own build of the head's ggml-rpc-server, made once per source and flags, checked, current."""
    started = time.monotonic()
    source = rpcsource.tarball()
    report("Checking the laptop's compilers and tools.", step="tools")
    tools = toolchain.assess(toolchain.record(target), source.manifest["cmake_minimum"])
    if not tools.ready:
        raise BuildRefused(tools.refusal())
    plan = buildplan.plan(tools, source.sha256)
    runtime = f"{install_dir.rstrip('/')}/runtime"
    path, log = f"{runtime}/{plan.dir_name}", f"{runtime}/build-{plan.key}.log"
    report(f"{tools.system}: {plan.summary()}.", flags=plan.cmake_args, notes=tools.notes, key=plan.key, log=log)
    rebuilt, sent = not is_intact(target, path), 0
    if rebuilt:
        tarball = f"{install_dir.rstrip('/')}/downloads/llama-rpc-source-{source.sha256[:12]}.tar.gz"
        sent = push_verified(target, source.path, tarball, source.sha256, report).sent
        follow(target, runtime, tarball, plan, protocol, report)
    else:
        report(f"Already built on this laptop from the same source with the same flags ({plan.dir_name}): "
               "nothing rebuilt.", step="check")
    found, spoken = check(target, path, protocol)
    ssh.sh(target, SWITCH, ssh.remote_path(runtime), plan.dir_name)
    return Built(path, plan, tools, rebuilt, time.monotonic() - started, sent, found, spoken, log)


def is_intact(target: ssh.SSHTarget, path: str) -> bool:
    return ssh.sh(target, INTACT, ssh.remote_path(path), timeout=120).exit_status == 0


def check(target: ssh.SSHTarget, path: str, expected: str) -> tuple[list[devices.Device], str]:
    """Like the bundle before use: the server lists its devices and speaks the head's RPC protocol."""
    try:
        found, protocol = devices.list_devices(target, path)
    except devices.DevicesError as exc:
        raise BuildFailed("check", f"The built server did not answer: {exc}") from None
    if protocol != expected:
        raise BuildFailed("check", f"The built server speaks RPC protocol {protocol or 'unknown'}, the head "
                                   f"{expected}: build it again.")
    return found, protocol


def follow(target: ssh.SSHTarget, runtime: str, tarball: str, plan: buildplan.BuildPlan, protocol: str,
           report: Report) -> None:
    """Run the build on the laptop, reporting its steps ("[12 of 40]") as they pass; BuildFailed names the step."""
    progress = Progress(report)
    args = [ssh.remote_path(runtime), plan.key, ssh.remote_path(tarball), str(plan.jobs), protocol,
            plan.generator, plan.target, *plan.cmake_args]
    try:
        for line in ssh.stream(target, BUILD, *args, idle_timeout=IDLE_S):
            if progress.take(line):
                return
    except ssh.SSHError as exc:
        if progress.ended:  # the script said how it ended, then the stream closed
            raise progress.failure(runtime, plan) from None
        lost = exc
    else:
        lost = None
    if not sweep(target, runtime):  # the laptop is out of reach: say so as any SSH failure
        raise ssh.SSHError(f"{lost or 'The connection ended.'} The build stopped at step {progress.step}; the laptop "
                           "removes the unfinished build itself and keeps its previous runtime.")
    progress.tail.append(f"(the connection to the build broke at step {progress.step}: {lost})" if lost else
                         f"(the build's process ended without a word at step {progress.step}: killed?)")
    raise progress.failure(runtime, plan)


def sweep(target: ssh.SSHTarget, runtime: str) -> bool:
    """Remove what a build killed outright left; False when the laptop cannot be reached (the next build sweeps)."""
    try:
        ssh.sh(target, SWEEP, ssh.remote_path(runtime), timeout=30)
    except ssh.SSHError:
        return False
    return True


class Progress:
    """Reads the build's lines: its steps, "[n/m]" counts, the last lines for a failure's message."""

    def __init__(self, report: Report) -> None:
        self.report, self.step, self.ended, self.busy = report, "prepare", False, ""
        self.tail: deque[str] = deque(maxlen=15)
        self.last = 0.0

    def take(self, line: str) -> bool:
        """True once the build is done and whole."""
        if line.startswith("@@built "):
            return True
        if line.startswith("@@failed "):
            self.ended, self.step = True, line.split()[1]
        elif line.startswith("@@busy "):
            self.ended, self.busy = True, line.split()[1]
        elif line.startswith("@@step "):
            self.step = line.split()[1]
            self.report(f"Building on the laptop: {STEP_WORDS.get(self.step, self.step)}.", step=self.step)
        elif line != "@@alive":
            self.tail.append(line)
            self.count(line)
        return False

    def count(self, line: str) -> None:
        steps, percent = STEP.match(line), PERCENT.match(line)
        done, total = (int(steps.group(1)), int(steps.group(2))) if steps else \
            (int(percent.group(1)), 100) if percent else (0, 0)
        now = time.monotonic()
        if total and (now - self.last >= REPORT_EVERY_S or done == total):
            self.last = now
            said = f"step {done} of {total}" if steps else f"{done} %"
            self.report(f"Building on the laptop: {said}.", step=self.step, steps_done=done, steps_total=total)

    def failure(self, runtime: str, plan: buildplan.BuildPlan) -> Exception:
        if self.busy:
            return BuildRefused(f"A build is already running on this laptop (pid {self.busy}); wait for it to end.")
        tail = "\n".join(self.tail) or "(nothing)"
        return BuildFailed(self.step, f"The build failed at step {self.step} ({STEP_WORDS.get(self.step, '')}); "
                                      f"nothing was installed and the laptop keeps its previous runtime. The last "
                                      f"lines of its log ({runtime}/build-{plan.key}.log on the laptop):\n{tail}")
