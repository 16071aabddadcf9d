"""How fast does the panel copy a file to a laptop, against OpenSSH's scp on the same link?

One simulated laptop behind a rate-capped link (default 1 Gbit); the same file
copied alternately by the panel's push (paramiko SFTP, resumable, through
nodes/remote/ssh.py) and by `scp`, several rounds; MB/s medians and their ratio.

    .venv/bin/python bench/push_vs_scp.py [--size-mb 200] [--rounds 3] [--rate 1gbit]
"""

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from lan import bench_lan, target


def timed(action) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size-mb", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rate", default="1gbit")
    args = parser.parse_args()
    from nodes.remote import ssh

    with tempfile.TemporaryDirectory() as folder, bench_lan(1, rate=args.rate) as lan:
        laptop = lan.laptops[0]
        node = target(lan, laptop)
        data = Path(folder) / "payload.bin"
        data.write_bytes(os.urandom(args.size_mb * 2**20))
        scp = ["scp", "-q", "-i", lan.key_path, "-o", f"UserKnownHostsFile={lan.known_hosts}",
               "-o", "StrictHostKeyChecking=yes", str(data), f"{laptop.user}@{laptop.address}:scp.bin"]
        rates = {"panel push (paramiko SFTP)": [], "OpenSSH scp": []}
        for _ in range(args.rounds):
            ssh.sh(node, "rm -f push.bin push.bin.part scp.bin")
            rates["panel push (paramiko SFTP)"].append(
                args.size_mb * 2**20 / 1e6 / timed(lambda: ssh.push(node, data, "push.bin")))
            rates["OpenSSH scp"].append(args.size_mb * 2**20 / 1e6 / timed(lambda: subprocess.run(scp, check=True)))
        ssh.forget(node)
    scp_median = statistics.median(rates["OpenSSH scp"])
    print(f"{args.size_mb} MiB of random data to one simulated laptop over a {args.rate} link, "
          f"{args.rounds} alternating rounds\n")
    print("| copier | MB/s (median, min–max) | ratio to scp |")
    print("|---|---|---|")
    for label, values in rates.items():
        median = statistics.median(values)
        print(f"| {label} | {median:.1f} ({min(values):.1f}–{max(values):.1f}) | {median / scp_median:.2f} |")


if __name__ == "__main__":
    main()
