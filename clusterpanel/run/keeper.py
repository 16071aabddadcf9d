"""`make run`'s processes in the foreground, kept running: each one's output on ours, prefixed with its name and
the time; one that stops is started again after a back-off, with a line saying what happened; a stop (Ctrl-C,
SIGTERM) at any moment, start-up included, ends every one within STOP_GRACE_S.

It replaces honcho, which stops every process as soon as one exits: in the chaos soak of issue 35, one Redis
restart killed the Celery worker and with it the whole panel. A supervisor such as supervisord restarts, but
keeps each process's output in its own log file and runs as a daemon with its own configuration: here one
person runs one command and reads one terminal, as with honcho.

Each process leads a session of its own, so that Ctrl-C in the terminal reaches this process alone (never a
process half-way through its start), and a stop reaches each process's whole group."""

import os
import shlex
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from typing import TextIO

FIRST_BACKOFF_S = 1.0
MAX_BACKOFF_S = 60.0
STABLE_S = 60.0  # a process that ran this long before it stopped is started again after the first back-off
STOP_GRACE_S = 10.0
COLOURS = (36, 33, 32, 35, 34, 31, 96, 93)


@dataclass
class Program:
    name: str
    argv: list[str]
    colour: int
    process: subprocess.Popen | None = None
    reader: threading.Thread | None = None
    started: float = 0.0
    due: float = 0.0  # when it starts again, after it stopped
    backoff: float = FIRST_BACKOFF_S
    restarts: int = 0


class Keeper:
    def __init__(self, commands: dict[str, str], env: dict[str, str], cwd: str, out: TextIO,
                 first_backoff: float = FIRST_BACKOFF_S, max_backoff: float = MAX_BACKOFF_S,
                 stable: float = STABLE_S, grace: float = STOP_GRACE_S) -> None:
        self.programs = [Program(f"{name}.1", shlex.split(command), COLOURS[n % len(COLOURS)], backoff=first_backoff)
                         for n, (name, command) in enumerate(commands.items())]
        self.env, self.cwd, self.out = env, cwd, out
        self.first_backoff, self.max_backoff, self.stable, self.grace = first_backoff, max_backoff, stable, grace
        self.width = max([len(program.name) for program in self.programs] + [len("panel")])
        self.colour = out.isatty()
        self.stopping = threading.Event()
        self.lock = threading.Lock()  # one line at a time, from every reader

    def stop(self, *_) -> None:
        """Ask every process to end; safe in a signal handler, at any moment."""
        self.stopping.set()

    def run(self) -> None:
        """Start every process and keep each running until `stop()`; then end them all."""
        try:
            for program in self.programs:
                if self.stopping.is_set():
                    break
                self.start(program)
            while not self.stopping.wait(0.2):
                self.tend()
        finally:
            self.end_all()

    def start(self, program: Program) -> None:
        program.process = subprocess.Popen(program.argv, cwd=self.cwd, env=self.env, stdin=subprocess.DEVNULL,
                                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                           start_new_session=True)
        program.started = time.monotonic()
        program.reader = threading.Thread(target=self.relay, args=(program, program.process.stdout), daemon=True)
        program.reader.start()

    def tend(self) -> None:
        """Note each process that stopped, and start again each one whose back-off is over."""
        now = time.monotonic()
        for program in self.programs:
            if program.process is not None and program.process.poll() is not None:
                self.stopped(program, now)
            elif program.process is None and program.due and now >= program.due and not self.stopping.is_set():
                program.restarts += 1
                program.due = 0.0
                self.start(program)

    def stopped(self, program: Program, now: float) -> None:
        code, ran = program.process.returncode, now - program.started
        self.signal_group(program.process.pid, signal.SIGKILL)  # what it left of its own (a pool's children)
        program.process = None
        if ran >= self.stable:
            program.backoff = self.first_backoff
        program.due = now + program.backoff
        self.say(f"{program.name} stopped ({exit_words(code)}) after {ran:.0f} s; starting it again in "
                 f"{program.backoff:g} s" + (f" (restart {program.restarts + 1})" if program.restarts else ""))
        program.backoff = min(program.backoff * 2, self.max_backoff)

    def end_all(self) -> None:
        running = [program for program in self.programs if program.process is not None]
        for program in running:
            self.signal_group(program.process.pid, signal.SIGTERM)
        deadline = time.monotonic() + self.grace
        while any(program.process.poll() is None for program in running) and time.monotonic() < deadline:
            time.sleep(0.1)
        for program in running:
            if program.process.poll() is None:
                self.say(f"{program.name} did not stop within {self.grace:g} s; killed")
            self.signal_group(program.process.pid, signal.SIGKILL)  # its group's stragglers too
            program.process.wait()
        for program in self.programs:
            if program.reader is not None:
                program.reader.join(2)

    @staticmethod
    def signal_group(pid: int, signum: int) -> None:
        try:
            os.killpg(pid, signum)
        except (ProcessLookupError, PermissionError):
            pass

    def relay(self, program: Program, pipe) -> None:
        for raw in pipe:
            self.write(program.name, program.colour, raw.decode("utf-8", "replace").rstrip("\n"))
        pipe.close()

    def say(self, text: str) -> None:
        self.write("panel", 0, text)

    def write(self, name: str, colour: int, text: str) -> None:
        prefix = f"{time.strftime('%H:%M:%S')} {name:<{self.width}} |"
        if self.colour and colour:
            prefix = f"\033[{colour}m{prefix}\033[0m"
        with self.lock:
            self.out.write(f"{prefix} {text}\n")
            self.out.flush()


def exit_words(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"
