"""docker-compose.yml's panel services, each run as a plain process of this machine.

No image registry is reachable here, so no container can be built; what a container would run is run
instead: each service's `command` and `environment` exactly as the file writes them (anchors and merge keys
resolved, `${VAR:-default}` filled in as compose does), in the order its `depends_on` conditions give. Only
what a container has and this machine has elsewhere is replaced: the hosts `redis` and `postgres` (by servers
the test started), the volumes' mount points (by folders), the published port (by a free one) and the image
(by this checkout and its virtualenv). The nginx in front of web (the `proxy` service) is this machine's
nginx, running the site file the service mounts, its ports replaced likewise. Compose puts the panel's
processes in one network, held by a service that runs nothing (`network_mode: service:network`), as one
machine's loopback does here: that service is the network alone, so no process stands for it.
"""

import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

from clusterpanel.run.redis_server import any_free_port
from tests import nginx

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
VARIABLE = re.compile(r"\$\$|\$\{(\w+)(?:(:?-)([^}]*))?\}")


def load() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def interpolate(text: str, variables: dict[str, str]) -> str:
    """Compose's substitution: `${VAR}`, `${VAR:-default}` (unset or empty), `${VAR-default}` (unset), `$$`."""
    def value(match: re.Match) -> str:
        if match.group(0) == "$$":
            return "$"
        name, kind, default = match.groups()
        found = variables.get(name)
        if kind == ":-" and not found or kind == "-" and found is None:
            return default
        return found or ""

    return VARIABLE.sub(value, text)


def panel_services(compose: dict) -> dict[str, dict]:
    """The services built from this repository (the others are Redis and PostgreSQL)."""
    return {name: spec for name, spec in compose["services"].items() if "build" in spec}


def proxies(compose: dict) -> dict[str, dict]:
    """The nginx services (the panel's proxy): run here by this machine's nginx."""
    return {name: spec for name, spec in compose["services"].items()
            if str(spec.get("image", "")).startswith("nginx:")}


def network_owner(name: str, spec: dict) -> str:
    """The service whose network this one uses (`network_mode: service:X`), else itself."""
    network = spec.get("network_mode", "")
    return network.removeprefix("service:") if network.startswith("service:") else name


def network_holders(compose: dict) -> set[str]:
    """The services that other panel services join (`network_mode: service:X`): what they are there for
    is their network."""
    return {owner for name, spec in panel_services(compose).items() if (owner := network_owner(name, spec)) != name}


def process_services(compose: dict) -> dict[str, dict]:
    """The panel services that run a process of the panel (all but the network's holder)."""
    holders = network_holders(compose)
    return {name: spec for name, spec in panel_services(compose).items() if name not in holders}


def dependencies(spec: dict) -> dict[str, str]:
    """Service → condition it waits for; sharing a service's network means waiting for it to start."""
    written = spec.get("depends_on") or {}
    if isinstance(written, list):
        written = dict.fromkeys(written)
    waits = {name: (how or {}).get("condition", "service_started") for name, how in written.items()}
    network = spec.get("network_mode", "")
    if network.startswith("service:"):
        waits.setdefault(network.removeprefix("service:"), "service_started")
    return waits


def argv(command: str | list[str]) -> list[str]:
    """A string command is split as compose splits it (shell words, no shell); a list is taken as it is."""
    return shlex.split(command) if isinstance(command, str) else [str(part) for part in command]


class Stack:
    """`up()` starts the panel services as compose would; `down()` stops them and what they started."""

    def __init__(self, folder: Path, variables: dict[str, str], hosts: dict[str, str]) -> None:
        self.compose, self.folder, self.variables, self.hosts = load(), folder, variables, hosts
        self.services = {**process_services(self.compose), **proxies(self.compose)}
        self.ports = self.published_by_network()
        self.processes: dict[str, subprocess.Popen] = {}
        (folder / "logs").mkdir(parents=True, exist_ok=True)

    @staticmethod
    def published(spec: dict) -> dict[str, str]:
        """Container port → a free port of this machine, for each `ports:` and `expose:` entry: here every
        service shares one loopback, so even a port only exposed inside the network needs one of its own."""
        entries = [*spec.get("ports", []), *spec.get("expose", [])]
        return {str(entry).rsplit(":", 1)[-1]: str(any_free_port()) for entry in entries}

    def published_by_network(self) -> dict[str, dict[str, str]]:
        """Each service's published ports: its network's (a port published by the network's holder is the
        port of whichever service listens on it there)."""
        every = self.compose["services"]
        owners = {name: network_owner(name, spec) for name, spec in self.services.items()}
        ports = {owner: self.published(every[owner]) for owner in set(owners.values())}
        return {name: ports[owner] for name, owner in owners.items()}

    def url(self, service: str, container_port: str) -> str:
        return f"http://127.0.0.1:{self.ports[service][container_port]}"

    def environment(self, name: str) -> dict[str, str]:
        """The service's environment as written, on top of what the image sets (PATH to its Python)."""
        spec = self.services[name]
        written = spec.get("environment") or {}
        if isinstance(written, list):
            written = dict(item.split("=", 1) for item in written)
        mounts = {str(volume).split(":")[1]: str(self.folder / str(volume).split(":")[0])
                  for volume in spec.get("volumes", [])}
        env = {}
        for key, raw in written.items():
            value = interpolate("" if raw is None else str(raw), self.variables)
            for host, here in self.hosts.items():
                value = value.replace(host, here)
            env[key] = mounts.get(value, value)
        return {**self.image_environment(), **env}

    def image_environment(self) -> dict[str, str]:
        """Stands in for the Dockerfile's ENV lines: its virtualenv first on PATH, its build cache, the static
        files it collected (`build()`)."""
        image = {"PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}",
                 "HOME": os.environ.get("HOME", "/root"), "LANG": "C.UTF-8", "PYTHONUNBUFFERED": "1",
                 "STATIC_ROOT": str(self.folder / "image-static")}
        if os.environ.get("CLUSTERPANEL_CACHE"):
            image["CLUSTERPANEL_CACHE"] = os.environ["CLUSTERPANEL_CACHE"]
        return image

    def command(self, name: str) -> list[str]:
        """The service's command as written, the container's ports replaced by the ones published for it."""
        ports = self.ports[name]
        written = [ports.get(part, part) for part in argv(self.services[name]["command"])]
        if name in proxies(self.compose):
            return nginx.command(self.folder / name, self.site(name), written[1:])
        return written

    def site(self, name: str) -> str:
        """The nginx site files the service mounts into conf.d/, listening on and passing to this machine's
        ports for the container's (on 127.0.0.1 alone)."""
        ports = self.ports[name]
        texts = [(ROOT / source).read_text() for source, target, *_ in
                 (str(volume).split(":") for volume in self.services[name].get("volumes", []))
                 if target.startswith("/etc/nginx/conf.d/")]
        text = "\n".join(texts)
        text = re.sub(r"(?<=127\.0\.0\.1:)(\d+)", lambda m: ports.get(m[1], m[1]), text)
        return re.sub(r"(?m)^(\s*listen\s+)(\d+)", lambda m: f"{m[1]}127.0.0.1:{ports.get(m[2], m[2])}", text)

    def start(self, name: str) -> subprocess.Popen:
        log = open(self.folder / "logs" / f"{name}.log", "w")
        with log:
            process = subprocess.Popen(self.command(name), cwd=ROOT,
                                       env=self.environment(name), stdout=log, stderr=subprocess.STDOUT,
                                       start_new_session=True)
        self.processes[name] = process
        return process

    def run(self, name: str, command: list[str]) -> subprocess.CompletedProcess:
        """A command run beside the service, as `docker compose exec` runs it: its environment, its folder."""
        return subprocess.run(command, cwd=ROOT, env=self.environment(name), capture_output=True, text=True,
                              timeout=120)

    def build(self) -> None:
        """What the Dockerfile does at build time that the services rely on: static files collected under their
        hashed names (the pages name them so), into the folder its ENV names."""
        dockerfile = (ROOT / "Dockerfile").read_text()
        assert "ENV STATIC_ROOT=" in dockerfile and "manage.py collectstatic" in dockerfile, "the image changed"
        env = {**self.image_environment(), "DATA_DIR": str(self.folder / "build"), "SECRET_KEY": "build-only"}
        subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"], cwd=ROOT, env=env,
                       check=True, timeout=300)

    def up(self, within: float = 300) -> list[str]:
        """Starts every panel service once what it depends on is there; the order they started in."""
        self.build()
        self.assert_one_network()
        waiting = dict(self.services)
        while waiting:
            ready = [name for name, spec in waiting.items() if all(
                other not in self.services or other in self.processes for other in dependencies(spec))]
            assert ready, f"services waiting on each other: {sorted(waiting)}"
            for name in ready:
                for other, condition in dependencies(waiting[name]).items():
                    if other in self.services:
                        self.wait_for(other, condition, within)
                self.start(name)
                del waiting[name]
        return list(self.processes)

    def assert_one_network(self) -> None:
        """Here every process shares one loopback; that stands for the containers only if they share one
        network too (the supervisor's tunnels listen on 127.0.0.1 for the workers' checks and the engines)."""
        networks = {network_owner(name, spec) for name, spec in self.services.items()
                    if spec.get("restart") != "no"}
        assert len(networks) == 1, f"the panel's long-running services are in several networks: {networks}"

    def wait_for(self, name: str, condition: str, within: float) -> None:
        if condition == "service_completed_successfully":
            try:
                code = self.processes[name].wait(within)
            except subprocess.TimeoutExpired:
                raise AssertionError(f"{name} did not finish within {within} s:\n{self.log(name)}") from None
            assert code == 0, f"{name} exited with {code}:\n{self.log(name)}"
        elif condition == "service_healthy":
            self.wait_healthy(name, within)

    def wait_healthy(self, name: str, within: float) -> None:
        """Runs the service's own healthcheck until it passes, as compose does."""
        test = self.services[name]["healthcheck"]["test"]
        check = ["sh", "-c", test[1]] if test[0] == "CMD-SHELL" else test[1:]
        ports = self.ports[name]
        for container, here in ports.items():
            check = [part.replace(f":{container}/", f":{here}/") for part in check]
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            assert self.processes[name].poll() is None, f"{name} exited:\n{self.log(name)}"
            if subprocess.run(check, cwd=ROOT, env=self.environment(name), capture_output=True).returncode == 0:
                return
            time.sleep(0.5)
        raise AssertionError(f"{name} was not healthy within {within} s:\n{self.log(name)}")

    def log(self, name: str) -> str:
        path = self.folder / "logs" / f"{name}.log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""

    def exited(self) -> dict[str, int]:
        """Long-running services that ended (one-shot ones that succeeded do not count)."""
        return {name: process.returncode for name, process in self.processes.items()
                if process.poll() is not None and (self.services[name].get("restart") != "no"
                                                   or process.returncode != 0)}

    def down(self) -> list[int]:
        """SIGTERM to every service, as `docker compose down`; then ends whatever any of them left behind,
        and says what that was."""
        for process in reversed(self.processes.values()):
            if process.poll() is None:
                process.terminate()
        for process in self.processes.values():
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        left = self.leftovers()
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return left

    def leftovers(self) -> list[int]:
        """Processes that still carry this stack's data folder in their environment (tunnels, engines)."""
        marker = f"DATA_DIR={self.environment(next(iter(self.services)))['DATA_DIR']}".encode()
        found = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and int(entry.name) != os.getpid():
                try:
                    environ = (entry / "environ").read_bytes()
                except OSError:
                    continue
                if marker in environ.split(b"\0"):
                    found.append(int(entry.name))
        return found
