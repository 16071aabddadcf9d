"""The seeds' lab: the journey of tests/journeys/test_lab_of_many.py at 39 simulated laptops (2 GB each), timed
step by step, with the plan, deployment and dashboard pages photographed into docs/screenshots/.

The suite runs the same journey at 17 laptops; this runs it at any size, through pytest so that every service
(Redis, daphne, a Celery worker, the supervisor, the metrics collector) is the suite's own.

    .venv/bin/python bench/lab_of_many.py [--laptops 39] [--no-shots]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--laptops", type=int, default=39)
    parser.add_argument("--no-shots", action="store_true")
    args = parser.parse_args()
    report = Path(tempfile.mkdtemp(prefix="bench-lab-")) / "report.json"
    env = {**os.environ, "JOURNEY_LAPTOPS": str(args.laptops), "JOURNEY_REPORT": str(report)}
    if not args.no_shots:
        env["JOURNEY_SHOTS"] = str(ROOT / "docs" / "screenshots")
    started = time.monotonic()
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-x",
                          "tests/journeys/test_lab_of_many.py"], cwd=ROOT, env=env)
    total = time.monotonic() - started
    if run.returncode != 0 or not report.exists():
        raise SystemExit(f"the journey at {args.laptops} laptops failed (exit {run.returncode}); see above")
    measured = json.loads(report.read_text())
    print(f"\nThe journey at {measured['laptops']} simulated laptops (2 GB each), 80-layer test model; "
          f"{total:.0f} s in all, services' start and stop included\n")
    print("| step | seconds |")
    print("|---|---|")
    for step, seconds in measured["steps"].items():
        print(f"| {step} | {seconds:.1f} |")
    before, retry = measured["before"], measured["retry"]
    print(f"\nbefore the kill: {before['tokens_per_second']:.1f} tokens/s; the retried answer: {retry['tokens']} "
          f"tokens at {retry['tokens_per_second'] or 0:.1f} tokens/s, first token after "
          f"{retry['time_to_first_token'] or 0:.1f} s")

if __name__ == "__main__":
    main()
