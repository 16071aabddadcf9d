"""What does "Build the runtime here" cost a laptop: the first build against a second run that finds it built?

One simulated laptop (a 1 Gbit link; optionally held to a share of one core), its own install folder emptied
first. The cold run copies the source tarball and builds ggml-rpc-server; each cached run after it checks the
laptop's tools, finds the build with the same source and flags, checks it (files' sha256, `--list-devices`,
the RPC protocol) and makes it current. Counted: seconds, the tarball bytes the panel sent, every byte the
laptop's eth0 received (SSH and all), and the build's steps.

    .venv/bin/python bench/build_here.py [--cached-runs 3] [--cpus 1.0]
"""

import argparse
import statistics
import subprocess
import time

from lan import bench_lan, target

FOLDER = "~/.cp-bench-build"


def rx_bytes(laptop) -> int:
    out = subprocess.run(["ip", "netns", "exec", laptop.netns, "cat", "/sys/class/net/eth0/statistics/rx_bytes"],
                         capture_output=True, text=True, check=True).stdout
    return int(out)


def run_once(reach, laptop, protocol: str) -> dict:
    from nodes.runtime import build_here

    steps, before, started = [0], rx_bytes(laptop), time.perf_counter()
    entered = {}  # when each step of the build began: tools, unpack, configure, build, check

    def report(message: str = "", **progress) -> None:
        steps[0] = progress.get("steps_total", steps[0])
        entered.setdefault(progress.get("step"), time.perf_counter())

    built = build_here.build_runtime(reach, FOLDER, protocol, report)
    ended = time.perf_counter()
    marks = [(name, at) for name, at in entered.items() if name] + [("end", ended)]
    phases = {name: later - at for (name, at), (_, later) in zip(marks, marks[1:], strict=False)}
    return {"seconds": ended - started, "sent": built.sent, "rx": rx_bytes(laptop) - before, "phases": phases,
            "rebuilt": built.rebuilt, "steps": steps[0], "plan": built.plan, "tools": built.tools}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cached-runs", type=int, default=3)
    parser.add_argument("--cpus", type=float, default=None, help="the laptop's share of one core (cgroup)")
    args = parser.parse_args()
    with bench_lan(1, rate="1gbit", name="bhere", subnet="10.239.0.0/24",
                   cpus={0: args.cpus} if args.cpus else None) as lan:
        from nodes.remote import ssh
        from nodes.runtime import build_here, rpcsource

        laptop = lan.laptops[0]
        reach = target(lan, laptop)
        ssh.sh(reach, 'rm -rf -- "$1"', ".cp-bench-build")
        source, protocol = rpcsource.tarball(), build_here.head_protocol()
        cold = run_once(reach, laptop, protocol)
        cached = [run_once(reach, laptop, protocol) for _ in range(args.cached_runs)]
        ssh.forget(reach)
    assert cold["rebuilt"] and not any(run["rebuilt"] for run in cached)
    tools, plan = cold["tools"], cold["plan"]
    print(f"One simulated laptop ({tools.system}, {tools.cores} cores seen"
          f"{f', held to {args.cpus} of a core' if args.cpus else ''}; 1 Gbit link), "
          f"source tarball {source.manifest['size'] / 2**20:.2f} MiB ({source.manifest['files']} files, "
          f"patches {source.manifest['patches_key']}), flags: {' '.join(plan.cmake_args)}\n")
    print("| run | seconds | tarball bytes sent | bytes into the laptop | build steps |")
    print("|---|---|---|---|---|")
    print(f"| cold: copy, configure, build, check | {cold['seconds']:.1f} | {cold['sent']:,} | {cold['rx']:,} | "
          f"{cold['steps']} |")
    seconds = [run["seconds"] for run in cached]
    print(f"| cached ({len(cached)} runs, median, min–max) | {statistics.median(seconds):.2f} "
          f"({min(seconds):.2f}–{max(seconds):.2f}) | {statistics.median(run['sent'] for run in cached):,.0f} | "
          f"{statistics.median(run['rx'] for run in cached):,.0f} | 0 |")
    print("\nThe cold run by step (seconds): " + ", ".join(
        f"{name} {seconds:.1f}" for name, seconds in cold["phases"].items()) + " (tools: reading the laptop's "
        "tools and copying the source; check: `--list-devices` in the new folder, then again where it landed, "
        "and the switch).")


if __name__ == "__main__":
    main()
