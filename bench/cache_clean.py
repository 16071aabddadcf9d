"""How long does cleaning a laptop's rpc cache of 10,000 files take: the listing, the decision, the removal, the
marking of what stays needed, against removing the same files one SSH command each?

One simulated laptop; each round fills its cache with `--files` small tensor files (16-hex names, last used at
distinct moments), a tenth of them needed by a deployment, under a cap of half of what they take. The clean's
steps are the panel's own (nodes/servers/cache.py over nodes/remote/ssh.py, nodes/servers/cachecap.py); the database's
part (which files the deployments need) is left out. The one-command-each line removes `--each` files that way and
scales the time to the same count. File sizes do not change the listing; a real tensor file costs the file system
more to free than these 4 KiB ones.

    .venv/bin/python bench/cache_clean.py [--files 10000] [--rounds 3] [--each 200]
"""

import argparse
import os
import random
import statistics
import subprocess
import time
from pathlib import Path

from lan import bench_lan, target

INSTALL = "~/.benchcache"


def fill(laptop, count: int) -> list[str]:
    """`count` files of 4 KiB in the laptop's cache, each last used a second after the one before."""
    cache = Path(laptop.home) / ".benchcache" / "cache" / "rpc"
    subprocess.run(["rm", "-rf", str(cache.parent.parent)], check=True)
    cache.mkdir(parents=True)
    names = [f"{random.getrandbits(64):016x}" for _ in range(count)]
    block = os.urandom(4096)
    for moment, name in enumerate(names, start=1_000_000):
        (cache / name).write_bytes(block)
        os.utime(cache / name, (moment, moment))
    subprocess.run(["chown", "-R", laptop.user, str(cache.parent.parent)], check=True)
    return names


def timed(action):
    started = time.perf_counter()
    result = action()
    return time.perf_counter() - started, result


def one_clean(node, laptop, count: int) -> dict[str, float]:
    from nodes.servers import cache as rpccache
    from nodes.servers import cachecap

    names = fill(laptop, count)
    needed = set(random.sample(names, count // 10))
    seconds = {}
    seconds["list (one command)"], found = timed(lambda: rpccache.listing(node, INSTALL))
    assert len(found.files) == count, len(found.files)
    seconds["decide"], chosen = timed(lambda: cachecap.choose(found, needed, found.held // 2))
    seconds["remove (one command)"], _ = timed(lambda: rpccache.remove(node, INSTALL, [f.name for f in chosen]))
    seconds["mark needed used"], _ = timed(lambda: rpccache.touch(node, INSTALL, sorted(needed)))
    seconds["whole clean"] = sum(seconds.values())
    seconds["removed"] = len(chosen)
    return seconds


def one_each(node, laptop, count: int, each: int) -> float:
    """Seconds to remove `count` files one `rm` command each, from `each` of them."""
    from nodes.remote import ssh

    names = fill(laptop, each)
    started = time.perf_counter()
    for name in names:
        ssh.run(node, ["rm", "-f", "--", f".benchcache/cache/rpc/{name}"])
    return (time.perf_counter() - started) * count / each


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--each", type=int, default=200)
    args = parser.parse_args()
    rows: dict[str, list[float]] = {}
    with bench_lan(1, name="cachebn", subnet="10.216.0.0/24") as lan:
        laptop = lan.laptops[0]
        node = target(lan, laptop)
        for _ in range(args.rounds):
            for step, value in one_clean(node, laptop, args.files).items():
                rows.setdefault(step, []).append(value)
            removed = int(rows["removed"][-1])
            rows.setdefault("remove, one `rm` command each (scaled)", []).append(
                one_each(node, laptop, removed, args.each))
        subprocess.run(["rm", "-rf", str(Path(laptop.home) / ".benchcache")], check=True)
    removed = int(statistics.median(rows.pop("removed")))
    print(f"A clean of a simulated laptop's cache of {args.files} files ({removed} removed, a tenth needed), "
          f"{args.rounds} rounds\n")
    print("| step | seconds (median, min–max) |")
    print("|---|---|")
    for step, values in rows.items():
        print(f"| {step} | {statistics.median(values):.3f} ({min(values):.3f}–{max(values):.3f}) |")


if __name__ == "__main__":
    main()
