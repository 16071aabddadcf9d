"""Simulated laptops of one core each, against laptops that share every core of this machine, beside other load.

The simulated laptops all run on this machine. A laptop that sees every core runs one rpc-server thread per core
(nodes/servers/rpcserver.py asks `nproc`), and ggml's threads wait for each other at every operation, spinning: with the
laptops' threads and any other process on two cores, one is always waiting for another that is not running.
nodes/simcpu.give_one_core gives each laptop one core (the laptops in turn), so its server runs one thread.

Three laptops, even split of the bundled model, the same servers throughout; each round measures both setups,
with 0, 1 and 2 busy processes beside them (`while True: pass`, as a test in another worker would be), the order
alternating:

    .venv/bin/python bench/laptop_cores.py [--rounds 3] [--tokens 64]
"""

import argparse
import os
import pwd
import statistics
import subprocess
import sys
from contextlib import contextmanager

from heterogeneous import INSTALL_DIR
from lan import bench_lan, with_runtime
from omp_spin import generate, load

BASE_PORT = 50460
SETUPS = ("one core each", "every core shared")
BESIDE = (0, 1, 2)


@contextmanager
def busy(count: int):
    spinning = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield
    finally:
        for process in spinning:
            process.kill()
            process.wait()


def give_cores(laptop, cores: set[int]) -> None:
    """The laptop's sshd and every process of its user (the SSH sessions the panel keeps open, which start its
    servers) on `cores`: a server keeps the cores of the process that started it."""
    uid = pwd.getpwnam(laptop.user).pw_uid
    os.sched_setaffinity(laptop.sshd_pid, cores)
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    os.sched_setaffinity(int(entry), cores)
            except (FileNotFoundError, ProcessLookupError):
                pass


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=64)
    args = parser.parse_args()
    every_core = os.sched_getaffinity(0)
    with bench_lan(3, rate="1gbit", name="bcores", subnet="10.245.0.0/24") as lan:
        from models_app.library.bundled import bundled_model_path
        from nodes.servers import rpcserver

        nodes = with_runtime(lan, INSTALL_DIR)
        pinned = {laptop.sshd_pid: os.sched_getaffinity(laptop.sshd_pid) for laptop in lan.laptops}
        ports = {setup: BASE_PORT + k for k, setup in enumerate(SETUPS)}
        rates: dict[tuple[str, int], list[float]] = {}
        threads: dict[str, list[int]] = {setup: [] for setup in SETUPS}
        try:
            for setup, port in ports.items():
                for laptop, node in zip(lan.laptops, nodes, strict=True):
                    give_cores(laptop, pinned[laptop.sshd_pid] if setup == SETUPS[0] else every_core)
                    rpcserver.start(node, INSTALL_DIR, port, bind=node.host)
                    threads[setup].append(rpcserver_threads(node, port))
            workers = load(nodes, {(setup, 0): port for setup, port in ports.items()},
                           {setup: [0, 1, 2] for setup in SETUPS}, [0], bundled_model_path())
            try:
                for round_no in range(args.rounds):
                    order = [(setup, beside) for beside in BESIDE for setup in SETUPS]
                    for setup, beside in order if round_no % 2 == 0 else order[::-1]:
                        with busy(beside):
                            rates.setdefault((setup, beside), []).append(
                                generate(workers[(setup, 0)], round_no, args.tokens))
            finally:
                for worker in workers.values():
                    worker.stdin.close()
                    worker.wait(30)
        finally:
            for port in ports.values():
                for node in nodes:
                    rpcserver.stop(node, INSTALL_DIR, port)
    report(args, rates, threads)


def rpcserver_threads(node, port: int) -> int:
    """The `-t` the server was started with (one per core its laptop sees)."""
    from nodes.remote import ssh

    line = ssh.run(node, ["sh", "-c", f"ps -o args= -C ggml-rpc-server | grep -- '-p {port} '"]).stdout
    words = line.split()
    return int(words[words.index("-t") + 1])


def report(args, rates, threads) -> None:
    print(f"\n{args.rounds} rounds of {args.tokens} greedy tokens, SmolLM2 135M (bundled), 3 simulated laptops, "
          f"even split, {os.cpu_count()} cores\n")
    print("| laptops | threads per server | busy processes beside | decode tok/s (median) | vs nothing beside |")
    print("|---|--:|--:|--:|--:|")
    for setup in SETUPS:
        alone = statistics.median(rates[(setup, 0)])
        for beside in BESIDE:
            rate = statistics.median(rates[(setup, beside)])
            print(f"| {setup} | {max(threads[setup])} | {beside} | {rate:.1f} | {rate / alone:.2f} |")
    pinned, shared = (statistics.median(rates[(setup, 2)]) for setup in SETUPS)
    print(f"\nBeside two busy processes, one core each is {pinned / shared:.1f}x as fast as every core shared.")


if __name__ == "__main__":
    main()
