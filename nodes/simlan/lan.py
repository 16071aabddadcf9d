"""A simulated laptop LAN: network namespaces on a bridge, each with its own sshd and user.

Each laptop is reached only over SSH, exactly like a real one. Everything made
here carries the LAN's name, so `down()` (and a second `up()` after a crash)
finds and removes exactly what this LAN made: namespaces, links, users, cgroups
and the processes inside its namespaces. Needs root.
"""

import contextlib
import hashlib
import ipaddress
import json
import os
import pwd
import re
import secrets
import shutil
import stat
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from nodes.simlan.arm import forget_binfmt
from nodes.simlan.cpu import give_one_core, hold_to
from nodes.simlan.processes import kill_pids, pids_of_uid

NAME_PATTERN = re.compile(r"^[a-z][a-z0-9]{0,7}$")
USER_COMMENT = "clusterpanel simlan"
CGROUP_ROOT = Path("/sys/fs/cgroup")
SSHD = "/usr/sbin/sshd"
# Its own UTS namespace gives each laptop its own host name. `ip netns exec` gives it a
# fresh /sys without the cgroup mounts, so mount the controllers again: a laptop made
# smaller by a cgroup can then read its own limit, as the panel's probe does.
START_SSHD = """
hostname "$1"
if mount -t tmpfs cgroups /sys/fs/cgroup 2>/dev/null; then
  for controller in memory cpu; do
    mkdir -p "/sys/fs/cgroup/$controller" && mount -t cgroup -o "$controller" cgroup "/sys/fs/cgroup/$controller"
  done
fi
exec "$2" -f "$3" -E "$4"
"""


class SimLanError(RuntimeError):
    pass


@dataclass
class Laptop:
    index: int
    name: str
    netns: str
    address: str
    user: str
    password: str
    home: str
    host_key: str
    host_key_fingerprint: str
    port: int = 22
    sshd_pid: int = 0


@dataclass
class Lan:
    name: str
    subnet: str
    bridge: str
    gateway: str
    key_path: str
    known_hosts: str
    rate: str | None = None
    laptops: list[Laptop] = field(default_factory=list)

    @property
    def public_key(self) -> str:
        return Path(self.key_path + ".pub").read_text().strip()


def run(*argv: str, check: bool = True, input: str | None = None) -> subprocess.CompletedProcess:
    result = subprocess.run(argv, capture_output=True, text=True, input=input)
    if check and result.returncode != 0:
        raise SimLanError(f"`{' '.join(argv)}` failed: {result.stderr.strip() or result.stdout.strip()}")
    return result


def require_root() -> None:
    if os.geteuid() != 0:
        raise SimLanError(
            "The simulated LAN needs root: it creates network namespaces, unix users and sshd "
            "processes. Run it as root (sudo .venv/bin/python manage.py simlan up 3), or skip it "
            "and register real laptops: `python manage.py addnode --name NAME --host ADDRESS "
            "--user USER --key-file KEY` or the Add laptop form."
        )
    missing = [tool for tool in ("ip", "tc", "useradd", "ssh-keygen", SSHD) if not shutil.which(tool)]
    if missing:
        raise SimLanError(f"Missing tools: {', '.join(missing)}. Install iproute2 and openssh-server.")


def ssh_fingerprint(private_key: Path) -> str:
    return run("ssh-keygen", "-l", "-E", "sha256", "-f", f"{private_key}.pub").stdout.split()[1]


def parse_rate(rate: str) -> int:
    """Bits per second from `1gbit`, `100mbit`, `500kbit`."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([kmg]?)bit", rate.strip().lower())
    if not match:
        raise SimLanError(f"Rate {rate!r} is not understood; write it like 1gbit, 100mbit or 500kbit.")
    return int(float(match.group(1)) * {"": 1, "k": 10**3, "m": 10**6, "g": 10**9}[match.group(2)])


def reachable_by_laptops(root: Path) -> Path:
    """`root`, if the laptops' own users can walk into it (their homes live below); else a folder in /var/tmp
    named after it (a data folder under /root, mode 700, would lock every laptop out of its own home)."""
    path = root.resolve()
    for folder in [path, *path.parents]:
        if folder.exists() and not folder.stat().st_mode & stat.S_IXOTH:
            digest = hashlib.sha1(str(path).encode()).hexdigest()[:10]
            return Path("/var/tmp") / f"clusterpanel-simlan-{digest}"
    return root


class SimLan:
    def __init__(self, name: str, state_root: Path, subnet: str = "10.231.0.0/24") -> None:
        if not NAME_PATTERN.match(name):
            raise SimLanError(f"LAN name {name!r}: use 1-8 lowercase letters or digits, starting with a letter.")
        self.name = name
        self.state_dir = reachable_by_laptops(Path(state_root)) / name
        self.network = ipaddress.ip_network(subnet)
        self.bridge = f"cpbr-{name}"

    # names of everything this LAN makes
    def netns(self, i: int) -> str:
        return f"cp-{self.name}-{i}"

    def veth(self, i: int) -> str:
        return f"cpv-{self.name}{i}"

    def user(self, i: int) -> str:
        return f"cpsim-{self.name}-{i}"

    def cgroup(self, controller: str, i: int) -> Path:
        return CGROUP_ROOT / controller / f"clusterpanel-{self.name}-{i}"

    @property
    def state_file(self) -> Path:
        return self.state_dir / "lan.json"

    def status(self) -> Lan | None:
        if not self.state_file.exists():
            return None
        data = json.loads(self.state_file.read_text())
        laptops = [Laptop(**item) for item in data.pop("laptops")]
        return Lan(**data, laptops=laptops)

    def up(self, count: int, rate: str | None = None, memory: str | None = None,
           cpus: float | None = None) -> Lan:
        require_root()
        if not 1 <= count <= 200:
            raise SimLanError("A simulated LAN has between 1 and 200 laptops.")
        bits = parse_rate(rate) if rate else None
        self.down()
        self.check_subnet_is_free()
        try:
            lan = self.make_lan(rate)
            for i in range(1, count + 1):
                lan.laptops.append(self.make_laptop(lan, i, bits, memory, cpus))
            self.write_known_hosts(lan)
            self.save(lan)
        except BaseException:
            self.down()
            raise
        return lan

    def check_subnet_is_free(self) -> None:
        for line in run("ip", "-4", "route", "show").stdout.splitlines():
            target = line.split()[0]
            if target == "default" or "/" not in target and not target[0].isdigit():
                continue
            route = ipaddress.ip_network(target if "/" in target else f"{target}/32", strict=False)
            if route.overlaps(self.network):
                raise SimLanError(f"Subnet {self.network} overlaps a route on this machine ({line.strip()}); "
                                  "choose another with --subnet.")

    def make_lan(self, rate: str | None) -> Lan:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.state_dir, 0o755)
        key = self.state_dir / "id_ed25519"
        run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"clusterpanel-simlan-{self.name}", "-f", str(key))
        gateway = str(next(self.network.hosts()))
        run("ip", "link", "add", self.bridge, "type", "bridge")
        run("ip", "addr", "add", f"{gateway}/{self.network.prefixlen}", "dev", self.bridge)
        run("ip", "link", "set", self.bridge, "up")
        return Lan(self.name, str(self.network), self.bridge, gateway, str(key),
                   str(self.state_dir / "known_hosts"), rate)

    def make_laptop(self, lan: Lan, i: int, bits: int | None, memory: str | None, cpus: float | None) -> Laptop:
        address = str(self.network.network_address + 10 + i)
        ns, veth = self.netns(i), self.veth(i)
        run("ip", "netns", "add", ns)
        run("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
        run("ip", "link", "set", veth, "master", self.bridge, "up")
        run("ip", "-n", ns, "addr", "add", f"{address}/{self.network.prefixlen}", "dev", "eth0")
        run("ip", "-n", ns, "link", "set", "lo", "up")
        run("ip", "-n", ns, "link", "set", "eth0", "up")
        run("ip", "-n", ns, "route", "add", "default", "via", lan.gateway)
        if bits:
            self.cap_rate(["tc"], veth, bits)
            self.cap_rate(["tc", "-n", ns], "eth0", bits)
        laptop_dir = self.state_dir / f"laptop{i}"
        laptop_dir.mkdir(mode=0o755)
        user, password, home = self.make_user(i, lan.public_key)
        host_key = laptop_dir / "ssh_host_ed25519_key"
        run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"{ns}", "-f", str(host_key))
        pid = self.start_sshd(ns, laptop_dir, host_key, address, user)
        give_one_core(i, pid)
        self.limit(i, pid, memory, cpus)
        public = host_key.with_suffix(".pub").read_text().split()
        fingerprint = ssh_fingerprint(host_key)
        return Laptop(i, f"{self.name}-{i}", ns, address, user, password, str(home),
                      f"{public[0]} {public[1]}", fingerprint, 22, pid)

    def rekey(self, i: int) -> Laptop:
        """Give laptop `i` a new host key, as a reinstalled laptop would have, and restart its sshd."""
        lan, laptop, laptop_dir = self.laptop(i)
        host_key = laptop_dir / "ssh_host_ed25519_key"
        host_key.unlink()
        host_key.with_suffix(".pub").unlink()
        run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", laptop.netns, "-f", str(host_key))
        self.restart_sshd(lan, laptop, laptop_dir)
        public = host_key.with_suffix(".pub").read_text().split()
        laptop.host_key = f"{public[0]} {public[1]}"
        laptop.host_key_fingerprint = ssh_fingerprint(host_key)
        self.write_known_hosts(lan)
        self.save(lan)
        return laptop

    def give_vulkan_gpu(self, i: int, present: bool = True) -> None:
        """Laptop `i` gets a GPU through Vulkan: Mesa's lavapipe, a real Vulkan driver that computes on the CPU
        (`present` False: it loses it, as a laptop whose GPU driver broke). ggml leaves CPU-type Vulkan devices
        out unless GGML_VK_VISIBLE_DEVICES names them, so the laptop's sshd sets it for every session (a real
        GPU's driver needs no setting); sshd restarts to read it."""
        lan, laptop, laptop_dir = self.laptop(i)
        config = laptop_dir / "sshd_config"
        lines = [line for line in config.read_text().splitlines() if not line.startswith("SetEnv GGML_VK")]
        config.write_text("\n".join([*lines, *(["SetEnv GGML_VK_VISIBLE_DEVICES=0"] if present else [])]) + "\n")
        self.restart_sshd(lan, laptop, laptop_dir)
        self.save(lan)

    def laptop(self, i: int) -> tuple[Lan, Laptop, Path]:
        lan = self.status()
        return lan, next(each for each in lan.laptops if each.index == i), self.state_dir / f"laptop{i}"

    def restart_sshd(self, lan: Lan, laptop: Laptop, laptop_dir: Path) -> None:
        """With the config it has: the processes it started (rpc-servers) go on."""
        self.kill_pids([laptop.sshd_pid])
        laptop.sshd_pid = self.start_sshd(laptop.netns, laptop_dir, laptop_dir / "ssh_host_ed25519_key",
                                          laptop.address, laptop.user, config_written=True)
        give_one_core(laptop.index, laptop.sshd_pid)

    def cap_rate(self, tc: list[str], device: str, bits: int) -> None:
        burst = max(bits // 8 // 250, 64 * 1024)  # 4 ms of traffic, at least 64 KiB
        run(*tc, "qdisc", "add", "dev", device, "root", "tbf",
            "rate", f"{bits}bit", "burst", str(burst), "latency", "50ms")

    def make_user(self, i: int, public_key: str) -> tuple[str, str, Path]:
        user = self.user(i)
        home = self.state_dir / "home" / user
        home.parent.mkdir(mode=0o755, exist_ok=True)
        run("useradd", "--create-home", "--home-dir", str(home), "--shell", "/bin/bash",
            "--comment", f"{USER_COMMENT} {self.name}", user)
        password = secrets.token_urlsafe(12)
        run("chpasswd", input=f"{user}:{password}\n")
        entry = pwd.getpwnam(user)
        ssh_dir = home / ".ssh"
        ssh_dir.mkdir(mode=0o700)
        (ssh_dir / "authorized_keys").write_text(public_key + "\n")
        os.chmod(ssh_dir / "authorized_keys", 0o600)
        for path in (ssh_dir, ssh_dir / "authorized_keys"):
            os.chown(path, entry.pw_uid, entry.pw_gid)
        return user, password, home

    def start_sshd(self, ns: str, laptop_dir: Path, host_key: Path, address: str, user: str,
                   config_written: bool = False) -> int:
        config = laptop_dir / "sshd_config"
        config.write_text(config.read_text() if config_written else "\n".join([
            f"ListenAddress {address}", "Port 22", f"HostKey {host_key}",
            f"PidFile {laptop_dir / 'sshd.pid'}", "AuthorizedKeysFile .ssh/authorized_keys",
            "PasswordAuthentication yes", "KbdInteractiveAuthentication no", "UsePAM no",
            "PermitRootLogin no", f"AllowUsers {user}", "Subsystem sftp internal-sftp",
            "AllowTcpForwarding yes", "PrintMotd no", "MaxStartups 100:30:200", "MaxSessions 64",
            "ClientAliveInterval 15", "",
        ]))
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
        (laptop_dir / "sshd.pid").unlink(missing_ok=True)
        run("ip", "netns", "exec", ns, "unshare", "--uts", "sh", "-c", START_SSHD,
            "sh", ns, SSHD, str(config), str(laptop_dir / "sshd.log"))
        pid_file = laptop_dir / "sshd.pid"
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            written = pid_file.read_text().strip() if pid_file.exists() else ""
            if written.isdigit():  # sshd may have created the file but not written it yet
                return int(written)
            time.sleep(0.02)
        raise SimLanError(f"sshd in {ns} did not start; see {laptop_dir / 'sshd.log'}")

    def limit(self, i: int, pid: int, memory: str | None, cpus: float | None) -> None:
        """Put the laptop's sshd, and so all it starts, in cgroups that make it smaller."""
        if memory:
            group = self.cgroup("memory", i)
            group.mkdir()
            (group / "memory.limit_in_bytes").write_text(memory)
            (group / "cgroup.procs").write_text(str(pid))
        if cpus:
            group = self.cgroup("cpu", i)
            group.mkdir()
            hold_to(group, cpus)
            (group / "cgroup.procs").write_text(str(pid))

    def write_known_hosts(self, lan: Lan) -> None:
        lines = [f"{laptop.address} {laptop.host_key}\n" for laptop in lan.laptops]
        Path(lan.known_hosts).write_text("".join(lines))

    def save(self, lan: Lan) -> None:
        data = asdict(lan)
        self.state_file.write_text(json.dumps(data, indent=2))
        os.chmod(self.state_file, 0o600)

    # tear-down: finds leftovers by name, so it also cleans up after a crash
    def down(self) -> list[str]:
        require_root()
        removed = []
        for ns in self.own_namespaces():
            self.kill_pids([int(p) for p in run("ip", "netns", "pids", ns, check=False).stdout.split()])
            run("ip", "netns", "del", ns, check=False)
            removed.append(f"namespace {ns}")
        for link in self.own_links():
            run("ip", "link", "del", link, check=False)
            removed.append(f"link {link}")
        for user in self.own_users():
            self.kill_pids(self.pids_of_uid(pwd.getpwnam(user).pw_uid))
            run("userdel", "--force", user, check=False)
            removed.append(f"user {user}")
        for group in self.own_cgroups():
            self.kill_pids([int(p) for p in (group / "cgroup.procs").read_text().split()])
            group.rmdir()
            removed.append(f"cgroup {group}")
        removed += forget_binfmt(self.name)  # an ARM laptop's (nodes/simlan/arm.py)
        if self.state_dir.exists():
            shutil.rmtree(self.state_dir)
        if self.state_dir.parent.name.startswith("clusterpanel-simlan-"):
            with contextlib.suppress(OSError):  # not empty: another LAN of the same data folder is up
                self.state_dir.parent.rmdir()
        return removed

    def own_namespaces(self) -> list[str]:
        names = [line.split()[0] for line in run("ip", "netns", "list").stdout.splitlines() if line.strip()]
        return [n for n in names if re.fullmatch(rf"cp-{self.name}-\d+", n)]

    def own_links(self) -> list[str]:
        """The bridge, and the veths on it: by name alone, LAN lab's laptop 12 (cpv-lab12) is also LAN lab1's
        laptop 2. A veth left off the bridge by a crash goes with its namespace, removed first."""
        found = []
        for line in run("ip", "-o", "link", "show").stdout.splitlines():
            name = re.match(r"\d+: ([^:@]+)", line)
            if name and (name.group(1) == self.bridge or re.fullmatch(rf"cpv-{self.name}\d+", name.group(1))
                         and f" master {self.bridge} " in line):
                found.append(name.group(1))
        return found

    def own_users(self) -> list[str]:
        return [e.pw_name for e in pwd.getpwall()
                if re.fullmatch(rf"cpsim-{self.name}-\d+", e.pw_name)
                and e.pw_gecos == f"{USER_COMMENT} {self.name}"]

    def own_cgroups(self) -> list[Path]:
        return [p for c in ("memory", "cpu") for p in (CGROUP_ROOT / c).glob(f"clusterpanel-{self.name}-*")
                if re.fullmatch(rf"clusterpanel-{self.name}-\d+", p.name)]

    pids_of_uid = staticmethod(pids_of_uid)
    kill_pids = staticmethod(kill_pids)
