"""A whole panel for a benchmark: scratch data folder, its own Redis, daphne, a Celery worker, the supervisor
(which runs the engines), and simulated laptops registered and probed. Everything goes at the end."""

import os
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from harness import ROOT, end, free_port, scratch_django, wait_port


class Panel:
    def __init__(self, data: Path, port: int, cookie: str, nodes: list, lan, pids: dict[str, int],
                 redis=None, processes: list | None = None) -> None:
        self.data, self.port, self.cookie, self.nodes, self.lan = data, port, cookie, nodes, lan
        self.pids, self.redis, self.processes = pids, redis, processes or []

    def restart_redis(self, down_for: float) -> None:
        """Redis killed as a crash would (no final save), started again on its port after `down_for` s."""
        from clusterpanel.run.redis_server import RedisServer

        self.redis.process.kill()
        self.redis.process.wait()
        time.sleep(down_for)
        self.redis = RedisServer.start(self.data / "redis", port=self.redis.port)
        self.pids["redis"] = self.redis.process.pid

    def alive(self) -> dict[str, bool]:
        """Whether each of the panel's processes still runs."""
        named = dict(zip(("web", "worker", "supervisor", "collector"), self.processes, strict=False))
        return {name: process.poll() is None for name, process in named.items()}

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def deploy(self, model, nodes=None, ctx: int = 1024, mode: str = "even", slots: int = 1,
               load_within: float = 300):
        """A READY deployment serving `slots` at once, with its engine loaded."""
        from models_app.deploying import deploy
        from models_app.models import Deployment

        deployment = deploy.create(model, nodes or self.nodes, ctx, mode=mode, slots=slots)
        if deployment.slots != slots:
            raise SystemExit(f"the planner gave {deployment.slots} slots, not {slots}")
        deploy.prepare(deployment)
        deployment.refresh_from_db()
        if deployment.status != "ready":
            raise SystemExit(f"deployment failed: {deployment.status_detail}")
        deadline = time.monotonic() + load_within
        while Deployment.objects.get(pk=deployment.pk).engine.get("state") != "ready":
            if time.monotonic() > deadline:
                raise SystemExit(f"the engine did not load within {load_within:.0f} s")
            time.sleep(0.2)
        deployment.refresh_from_db()
        return deployment


@contextmanager
def scratch_panel(laptops: int = 3, rate: str = "1gbit", name: str = "bpanel", subnet: str = "10.240.0.0/24",
                  collector: bool = False, worker_pool: tuple[str, ...] = ("--pool", "solo"),
                  laptop_cpus: float | None = None):
    """`collector`: the metrics collector too (live laptop samples for a dashboard); `worker_pool`: how the
    Celery worker runs its tasks (make run's: prefork, four at once); `laptop_cpus`: each laptop held to that
    share of one core (slow laptops, beside a head that is not held)."""
    processes, simulated, panel = [], None, None
    with scratch_django("bench-panel-") as scratch:
        data, redis = scratch.data, scratch.redis
        try:
            from django.test import Client

            from clusterpanel.accounts.models import Role, User
            from clusterpanel.web.staticfiles import collect_once
            from nodes.models import ActionKind, Node, NodeAction
            from nodes.simlan.lan import SimLan
            from nodes.tasks import run_action

            collect_once()  # its pages name their scripts by hashed names: without them every page is a 500
            admin = User.objects.create_user("bench", password="bench-password-1", role=Role.ADMIN)
            client = Client()
            client.force_login(admin)
            cookie = f"sessionid={client.cookies['sessionid'].value}"
            simulated = SimLan(name, data / "simlan", subnet=subnet)
            lan = simulated.up(laptops, rate=rate, cpus=laptop_cpus)
            key = Path(lan.key_path).read_text()
            nodes = []
            for laptop in lan.laptops:
                node = Node.objects.create(name=laptop.name, host=laptop.address, username=laptop.user,
                                           host_key=laptop.host_key, private_key=key)
                run_action(NodeAction.objects.create(node=node, kind=ActionKind.PROBE).pk)
                nodes.append(node)
            port, env = free_port(), {**os.environ}
            (data / "logs").mkdir(exist_ok=True)

            def logged(name: str) -> dict:  # each process's output in the data folder's logs/, read while it runs
                with open(data / "logs" / f"{name}.log", "ab") as log:
                    return {"stdout": os.dup(log.fileno()), "stderr": subprocess.STDOUT, "cwd": ROOT, "env": env}

            def start(name: str, argv: list[str]) -> subprocess.Popen:
                options = logged(name)
                try:
                    return subprocess.Popen(argv, **options)
                finally:
                    os.close(options["stdout"])

            processes = [
                start("web", [sys.executable, "-m", "clusterpanel.web.webserver", "-b", "127.0.0.1", "-p",
                              str(port), "clusterpanel.asgi:application"]),
                start("worker", [sys.executable, "-m", "celery", "-A", "clusterpanel", "worker", *worker_pool,
                                 "--loglevel", "WARNING", "--without-mingle", "--without-gossip"]),
                start("supervisor", [sys.executable, "manage.py", "supervise", "--interval", "0.5"]),
            ]
            if collector:
                processes.append(start("metrics", [sys.executable, "manage.py", "metrics"]))
            wait_port(port)
            pids = {"web": processes[0].pid, "worker": processes[1].pid, "supervisor": processes[2].pid,
                    "redis": redis.process.pid}
            panel = Panel(data, port, cookie, nodes, lan, pids, redis, processes)
            yield panel
        finally:
            scratch.redis = panel.redis if panel else redis  # a restart replaced it: scratch_django stops that one
            for process in reversed(processes):
                end(process)
            if simulated:
                simulated.down()


def pages_answer(panel: Panel, paths: tuple[str, ...] = ("/", "/nodes/", "/models/", "/chat/", "/no-such-page/")):
    """Each page's status as a signed-in admin gets it: a benchmark that drives pages measures pages, not 500s."""
    import urllib.error
    import urllib.request

    found = {}
    for path in paths:
        request = urllib.request.Request(panel.base + path, headers={"Cookie": panel.cookie})
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                found[path] = answer.status
        except urllib.error.HTTPError as exc:
            found[path] = exc.code
    return found


if __name__ == "__main__":  # `python bench/scratch_panel.py`: does a scratch panel serve its pages?
    with scratch_panel(laptops=1, name="bcheck", subnet="10.241.0.0/24") as checked:
        for page, status in pages_answer(checked).items():
            print(f"{page:<16} {status}")
