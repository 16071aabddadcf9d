"""An anonymous 200 MiB POST to /v1/chat/completions, against plain daphne and against the panel's web server.

For each: how much of the body the server let the client send, how long until it answered, what it
answered, and how much the server process grew (VmRSS). Scratch data folder, no database needed: the
request is anonymous.

    .venv/bin/python bench/body_limits.py [--rounds 3]
"""

import argparse
import os
import re
import select
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.harness import free_port  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
HUGE, BLOCK = 200 << 20, 64 << 10
SERVERS = {"daphne": "daphne", "panel (clusterpanel.web.webserver)": "clusterpanel.web.webserver"}


def rss_kib(pid: int) -> int:
    return int(re.search(r"VmRSS:\s+(\d+)", Path(f"/proc/{pid}/status").read_text()).group(1))


def post_huge(port: int) -> tuple[int, float, str]:
    """(bytes of body sent, seconds to the answer, its status line)."""
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        sock.sendall(f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {HUGE}\r\n\r\n".encode())
        started, sent, block = time.monotonic(), 0, b"x" * BLOCK
        try:
            while sent < HUGE and not select.select([sock], [], [], 0)[0]:
                sock.sendall(block)
                sent += BLOCK
        except (BrokenPipeError, ConnectionResetError):
            pass
        answer = sock.recv(4096)
        return sent, time.monotonic() - started, answer.split(b"\r\n", 1)[0].decode()


def warm_up(port: int) -> None:
    """A small anonymous POST first: the first request loads Django's views, which is no part of the cost."""
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\n\r\n{}")
        sock.recv(4096)


def measure(module: str, rounds: int, data: str) -> None:
    port = free_port()
    env = {**os.environ, "DATA_DIR": data}
    server = subprocess.Popen([sys.executable, "-m", module, "-b", "127.0.0.1", "-p", str(port),
                               "clusterpanel.asgi:application"], cwd=ROOT, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.2)
        warm_up(port)
        for _ in range(rounds):
            before = rss_kib(server.pid)
            sent, seconds, status = post_huge(port)
            time.sleep(0.5)
            grown = rss_kib(server.pid) - before
            print(f"  sent {sent / 2**20:7.1f} MiB, answered in {seconds:6.3f} s ({status}), "
                  f"server grew {grown / 1024:6.1f} MiB (now {rss_kib(server.pid) / 1024:.0f} MiB)")
    finally:
        server.terminate()
        server.wait(15)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as data:
        for name, module in SERVERS.items():
            print(name)
            measure(module, args.rounds, data)


if __name__ == "__main__":
    main()
