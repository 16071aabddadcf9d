"""Run a Python script as `__main__`, then write the peak memory of it and its children, and the CPU seconds they
used, to $PEAK_FILE ("bytes seconds").

`python peak_of.py manage.py addmodel f.gguf`: its own peak from VmHWM (getrusage's ru_maxrss would carry
the peak of the test process that started it), its children's from getrusage (they were started by this
small process, so theirs carry at most its peak). CPU time, not the wall clock, because a shared machine running
four test workers on two cores stretches the wall clock of a Django start by seconds.
"""

import atexit
import os
import resource
import runpy
import sys
from pathlib import Path


def write_peak() -> None:
    status = Path("/proc/self/status").read_text().splitlines()
    own = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    used = sum(resource.getrusage(who).ru_utime + resource.getrusage(who).ru_stime
               for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    Path(os.environ["PEAK_FILE"]).write_text(f"{max(own, children) * 1024} {used}")


if __name__ == "__main__":
    atexit.register(write_peak)
    sys.argv = sys.argv[1:]
    sys.path.insert(0, str(Path(sys.argv[0]).resolve().parent))
    runpy.run_path(sys.argv[0], run_name="__main__")
