"""How long one write waits for SQLite's lock while other processes keep writing: SQLite's own busy wait (what every
panel process used) against trying again every 2 ms (clusterpanel/kit/write_turns.py), side by side in one run.

Each other writer holds the lock for `--hold-ms` (a request's queueing under load), then lets it go for a few ms,
in a loop, as a burst of requests does; the measured writer makes one UPDATE, like the engine claiming a job,
`--writes` times, alternating the two ways. WAL and IMMEDIATE transactions, as the panel's settings.

    python3 bench/sqlite_turns.py [--writers 1 3 6] [--writes 40] [--hold-ms 20]
"""

import argparse
import multiprocessing
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

RETRY_EVERY_S = 0.002  # as clusterpanel/kit/write_turns.py


def writer(path: str, hold_s: float, stop) -> None:
    connection = sqlite3.connect(path, timeout=20, isolation_level=None)
    while not stop.is_set():
        connection.execute("BEGIN IMMEDIATE")
        connection.execute("INSERT INTO rows(v) VALUES (1)")
        time.sleep(hold_s)
        connection.execute("COMMIT")
        time.sleep(0.005)


def one_write(connection: sqlite3.Connection, prompt: bool) -> float:
    started = time.perf_counter()
    while True:
        try:
            connection.execute("UPDATE claim SET v = v + 1")
            return (time.perf_counter() - started) * 1000
        except sqlite3.OperationalError:
            if not prompt:
                raise
            time.sleep(RETRY_EVERY_S)


def measure(path: str, writers: int, writes: int, hold_s: float) -> dict[str, list[float]]:
    stop = multiprocessing.Event()
    others = [multiprocessing.Process(target=writer, args=(path, hold_s, stop)) for _ in range(writers)]
    for process in others:
        process.start()
    waits = {"busy wait": [], "every 2 ms": []}
    ways = {"busy wait": sqlite3.connect(path, timeout=20, isolation_level=None),
            "every 2 ms": sqlite3.connect(path, timeout=0, isolation_level=None)}
    try:
        time.sleep(0.5)
        for number in range(writes):
            for name in (list(ways) if number % 2 else list(ways)[::-1]):
                waits[name].append(one_write(ways[name], name == "every 2 ms"))
                time.sleep(0.013)
    finally:
        stop.set()
        for process in others:
            process.join()
    return waits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writers", type=int, nargs="+", default=[1, 3, 6])
    parser.add_argument("--writes", type=int, default=40)
    parser.add_argument("--hold-ms", type=float, default=20)
    args = parser.parse_args()
    print(f"\nOne UPDATE's wait for the lock, ms, {args.writes} each way, other writers holding it {args.hold_ms:g} ms "
          "at a time\n")
    print("| other writers | busy wait p50 | p90 | max | every 2 ms p50 | p90 | max | p50 ratio |")
    print("|--:|--:|--:|--:|--:|--:|--:|--:|")
    for count in args.writers:
        with tempfile.TemporaryDirectory(prefix="bench-sqlite-") as folder:
            path = str(Path(folder) / "turns.sqlite3")
            setup = sqlite3.connect(path, isolation_level=None)
            setup.execute("PRAGMA journal_mode=WAL")
            setup.executescript("CREATE TABLE rows(v); CREATE TABLE claim(v); INSERT INTO claim VALUES (0);")
            setup.close()
            waits = measure(path, count, args.writes, args.hold_ms / 1000)
        row = []
        for name in ("busy wait", "every 2 ms"):
            ordered = sorted(waits[name])
            row += [statistics.median(ordered), ordered[int(0.9 * (len(ordered) - 1))], ordered[-1]]
        ratio = row[0] / row[3] if row[3] else float("inf")
        print(f"| {count} | " + " | ".join(f"{value:.1f}" for value in row) + f" | {ratio:.1f}× |", flush=True)


if __name__ == "__main__":
    main()
