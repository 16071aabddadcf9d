"""The panel's own Redis: started when REDIS_URL is not given, on a private port."""

import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

PREFERRED_PORT = 6390


class RedisStartError(RuntimeError):
    pass


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def any_free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def choose_port(preferred: int = PREFERRED_PORT) -> tuple[int, str]:
    """A free port, and a plain note when the preferred one was taken."""
    if port_is_free(preferred):
        return preferred, ""
    port = any_free_port()
    return port, f"Port {preferred} is in use by another program; the panel's Redis uses port {port} instead."


def redis_command(port: int, data_dir: Path) -> list[str]:
    binary = shutil.which("redis-server")
    if binary is None:
        raise RedisStartError(
            "redis-server is not installed. Run `make run` (it installs it) or "
            "`apt-get install redis-server`, or set REDIS_URL to a Redis you run."
        )
    return [
        binary, "--port", str(port), "--bind", "127.0.0.1",
        "--dir", str(data_dir), "--dbfilename", "redis.rdb",
        "--save", "60 1000", "--appendonly", "no",
        "--daemonize", "no", "--protected-mode", "yes",
    ]


def wait_until_ready(port: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
                sock.sendall(b"PING\r\n")
                if sock.recv(16).startswith(b"+PONG"):
                    return
        except OSError:
            pass
        time.sleep(0.05)
    raise RedisStartError(f"Redis on port {port} did not answer within {timeout:.0f} s.")


@dataclass
class RedisServer:
    """A redis-server child process; `stop()` ends exactly that process."""

    port: int
    process: subprocess.Popen

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @classmethod
    def start(cls, data_dir: Path, port: int | None = None) -> "RedisServer":
        data_dir.mkdir(parents=True, exist_ok=True)
        port = port or any_free_port()
        log = open(data_dir / "redis.log", "ab")
        process = subprocess.Popen(redis_command(port, data_dir), stdout=log, stderr=log)
        log.close()
        server = cls(port, process)
        try:
            wait_until_ready(port)
        except RedisStartError:
            server.stop()
            raise
        return server

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
