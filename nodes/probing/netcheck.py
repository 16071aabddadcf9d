"""How good is the link to a laptop? Round trips and throughput over plain TCP, as the seeds advise.

The laptop connects back to a port the head opens just for the check, with
bash's /dev/tcp, so the figures are the LAN's own, not SSH's encryption's.
"""

import socket
import statistics
import threading
import time
from dataclasses import asdict, dataclass

from nodes.remote import ssh

ECHO = 'exec 3<>"/dev/tcp/$1/$2"; while IFS= read -r line <&3; do printf "%s\\n" "$line" >&3; done'
SINK = 'cat < "/dev/tcp/$1/$2" | wc -c'
SOURCE = 'head -c 100000000000 /dev/zero > "/dev/tcp/$1/$2" 2>/dev/null; true'


class NetCheckError(Exception):
    pass


@dataclass(frozen=True)
class LinkReport:
    rtt_median_ms: float
    rtt_p99_ms: float
    to_laptop_mb_s: float
    from_laptop_mb_s: float

    def as_dict(self) -> dict:
        return asdict(self)


class Callback:
    """A one-off listener on the head and the laptop-side script that connects to it."""

    def __init__(self, target: ssh.SSHTarget, script: str, timeout: float = 15.0) -> None:
        self.target, self.script, self.timeout = target, script, timeout
        self.result: ssh.Result | None = None
        self.error: Exception | None = None

    def __enter__(self) -> socket.socket:
        self.listener = socket.create_server((ssh.local_address(self.target), 0))
        self.listener.settimeout(self.timeout)
        address, port = self.listener.getsockname()[:2]
        self.thread = threading.Thread(target=self.remote, args=(address, port), daemon=True)
        self.thread.start()
        try:
            self.conn, _ = self.listener.accept()
        except TimeoutError:
            self.listener.close()
            raise NetCheckError("The laptop could not connect back to the head (is bash there? a firewall on "
                                "the head?).") from None
        self.conn.settimeout(self.timeout)
        return self.conn

    def remote(self, address: str, port: int) -> None:
        try:
            argv = ["bash", "-c", self.script, "bash", address, str(port)]  # /dev/tcp is bash's, not sh's
            self.result = ssh.run(self.target, argv, timeout=self.timeout + 30)
        except Exception as exc:  # reported by the caller through self.error
            self.error = exc

    def __exit__(self, *exc_info) -> None:
        self.conn.close()
        self.listener.close()
        self.thread.join(self.timeout + 30)


def round_trips(target: ssh.SSHTarget, count: int = 100) -> list[float]:
    times = []
    with Callback(target, ECHO) as conn, conn.makefile("rb") as reader:
        for i in range(count):
            started = time.perf_counter()
            conn.sendall(b"%d\n" % i)
            if not reader.readline():
                raise NetCheckError("The laptop stopped answering during the round-trip test.")
            times.append((time.perf_counter() - started) * 1000)
    return times


def connect_rtt_ms(target: ssh.SSHTarget, count: int = 5, timeout: float = 1.0) -> float | None:
    """The link's round trip as a probe can afford it: the median of a few TCP connects to the laptop's SSH port
    (the laptop's kernel answers each in one round trip, whatever sshd then does). None when none connected."""
    times = []
    for _ in range(count):
        started = time.perf_counter()
        try:
            socket.create_connection((target.host, target.port), timeout=timeout).close()
        except OSError:
            continue
        times.append((time.perf_counter() - started) * 1000)
    return round(statistics.median(times), 3) if times else None


def to_laptop(target: ssh.SSHTarget, seconds: float) -> float:
    callback = Callback(target, SINK)
    with callback as conn:
        block, started = bytes(1 << 20), time.perf_counter()
        while time.perf_counter() - started < seconds:
            conn.sendall(block)
        conn.shutdown(socket.SHUT_WR)
    elapsed = time.perf_counter() - started
    received = int((callback.result.stdout if callback.result else "0").strip() or 0)
    return received / elapsed / 1e6


def from_laptop(target: ssh.SSHTarget, seconds: float) -> float:
    with Callback(target, SOURCE) as conn:
        received, started = 0, time.perf_counter()
        while time.perf_counter() - started < seconds:
            chunk = conn.recv(1 << 20)
            if not chunk:
                break
            received += len(chunk)
        elapsed = time.perf_counter() - started
    return received / elapsed / 1e6


def check(target: ssh.SSHTarget, pings: int = 100, seconds: float = 3.0) -> LinkReport:
    times = round_trips(target, pings)
    ordered = sorted(times)
    return LinkReport(
        rtt_median_ms=round(statistics.median(times), 3),
        rtt_p99_ms=round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))], 3),
        to_laptop_mb_s=round(to_laptop(target, seconds), 1),
        from_laptop_mb_s=round(from_laptop(target, seconds), 1),
    )


def warnings(report: dict, facts: dict | None) -> list[str]:
    """The seeds' rules of thumb, in plain words."""
    facts = facts or {}
    found = []
    gigabit = (facts.get("link_speed_mbps") or 0) >= 1000
    slowest = min(report["to_laptop_mb_s"], report["from_laptop_mb_s"])
    if gigabit and slowest < 80:
        found.append(f"Throughput is {slowest:.0f} MB/s on a link that says it is gigabit (expect over 100): "
                     "check the cable, the switch port, or a 100 Mbit hop.")
    if report["rtt_median_ms"] > 1.0:
        found.append(f"Round trips take {report['rtt_median_ms']:.2f} ms (median); over 1 ms slows every token. "
                     "Use a wired link and one switch for all laptops.")
    if facts.get("wireless"):
        found.append("The laptop is on Wi-Fi: latency and throughput will vary; plug in a cable.")
    return found
