"""Set up and start the whole panel in the foreground, its processes kept running (clusterpanel/run/keeper.py)."""

import os
import shlex
import signal
import sys

import redis
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from clusterpanel.accounts.first_admin import ensure_first_admin
from clusterpanel.run import processes
from clusterpanel.run.keeper import Keeper
from clusterpanel.run.redis_server import choose_port, port_is_free, redis_command
from models_app.library.adding import ensure_bundled


class Interrupted(Exception):
    """A stop asked for before the panel's processes started."""


def interrupted(signum, frame):
    raise Interrupted
class Command(BaseCommand):
    help = "Migrate, create the first admin, then run Redis, workers and the web server."

    def add_arguments(self, parser):
        parser.add_argument("--host", default=os.environ.get("PANEL_HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=int(os.environ.get("PANEL_PORT", "8000")))
        parser.add_argument("--workers", type=int, default=int(os.environ.get("CELERY_CONCURRENCY", "4")))

    def handle(self, host: str, port: int, workers: int, **options) -> None:
        # Line by line also when the terminal is a pipe (`make run | tee`, a service manager): the address and
        # the first password must show while the panel runs, not when it stops.
        sys.stdout.reconfigure(line_buffering=True)
        # Whatever a process leaves behind (a check's child, a pool's workers) becomes ours to end.
        processes.become_subreaper()
        previous = {signum: signal.signal(signum, interrupted) for signum in (signal.SIGINT, signal.SIGTERM)}
        try:
            self.start(host, port, workers)
        except Interrupted:
            self.stdout.write("Stopped before the panel started.")
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            leftovers = processes.end_children()
            if leftovers:
                self.stdout.write(f"Stopped {leftovers} process(es) left behind.")

    def start(self, host: str, port: int, workers: int) -> None:
        if not port_is_free(port, host):
            raise CommandError(
                f"Port {port} on {host} is already in use (is the panel already running?). "
                "Stop that program or choose another port with PANEL_PORT=8080 make run."
            )
        settings.RUN_DIR.mkdir(parents=True, exist_ok=True)
        call_command("migrate", interactive=False, verbosity=0)
        call_command("collectstatic", interactive=False, verbosity=0)
        ensure_bundled()
        self.check_cpu()
        commands, redis_url = self.processes(host, port, workers)
        # Unbuffered: each process writes through a pipe, where Python would hold lines such as the demo's
        # "Demo ready" until the process ends.
        env = {**os.environ, "REDIS_URL": redis_url, "DATA_DIR": str(settings.DATA_DIR), "PYTHONUNBUFFERED": "1"}
        keeper = Keeper(commands, env, str(settings.BASE_DIR), sys.stdout)
        for signum in (signal.SIGINT, signal.SIGTERM):  # from here on a stop ends what has started, in order
            signal.signal(signum, keeper.stop)
        try:
            self.announce(host, port, redis_url)
            keeper.run()
        finally:
            (settings.RUN_DIR / "redis.url").unlink(missing_ok=True)
            if "demo" in commands:
                from clusterpanel import demo

                demo.harness().down()  # in case the demo process was killed before it cleaned up

    def check_cpu(self) -> None:
        """Before any engine loads a model: which of llama.cpp's kernels run here (kept once tried)."""
        from models_app.llamacpp import cpucheck

        verdict = cpucheck.verdict()
        if not verdict.runs:
            raise CommandError(verdict.detail)
        if not verdict.extra_buffers:
            self.stdout.write(self.style.WARNING(verdict.detail))

    def processes(self, host: str, port: int, workers: int) -> tuple[dict[str, str], str]:
        python = shlex.quote(sys.executable)
        processes = {}
        redis_url = os.environ.get("REDIS_URL", "")
        if not redis_url:
            redis_port, note = choose_port()
            if note:
                self.stdout.write(self.style.WARNING(note))
            redis_url = f"redis://127.0.0.1:{redis_port}/0"
            (settings.RUN_DIR / "redis.url").write_text(redis_url)
            processes["redis"] = shlex.join(redis_command(redis_port, settings.DATA_DIR))
        else:
            self.check_redis(redis_url)
        # daphne, refusing request bodies over their limit before reading them (clusterpanel/web/webserver.py);
        # behind a proxy, taking the client's address and scheme from the headers the proxy sets.
        proxied = "--proxy-headers " if settings.BEHIND_TLS_PROXY else ""
        processes["web"] = (f"{python} -m clusterpanel.web.webserver -b {shlex.quote(host)} -p {port} {proxied}"
                            "clusterpanel.asgi:application")
        processes["worker"] = f"{python} -m celery -A clusterpanel worker --loglevel INFO --concurrency {workers}"
        # Periodic tasks (settings.CELERY_BEAT_SCHEDULE: the laptops' caches cleaned every hour); one beat only.
        schedule = shlex.quote(str(settings.RUN_DIR / "celerybeat-schedule"))
        processes["beat"] = f"{python} -m celery -A clusterpanel beat --loglevel INFO --schedule {schedule}"
        processes["supervisor"] = f"{python} manage.py supervise"
        processes["metrics"] = f"{python} manage.py metrics"
        if self.demo_wanted():
            processes["demo"] = f"{python} manage.py demo"
        return processes, redis_url

    def demo_wanted(self) -> bool:
        """Three simulated laptops with the bundled model, unless DEMO=0; they need root (namespaces)."""
        if os.environ.get("DEMO", "1") == "0":
            return False
        if os.geteuid() != 0:
            self.stdout.write("  No demo laptops: simulated laptops need root (sudo make run). Add real laptops "
                              "on the Laptops page (Add laptop), or `.venv/bin/python manage.py addnode`.")
            return False
        return True

    def check_redis(self, url: str) -> None:
        try:
            redis.Redis.from_url(url, socket_connect_timeout=3).ping()
        except redis.RedisError as exc:
            raise CommandError(f"Cannot reach the Redis at REDIS_URL={url}: {exc}") from None

    def announce(self, host: str, port: int, redis_url: str) -> None:
        username, password = ensure_first_admin()
        self.stdout.write(self.style.SUCCESS(f"clusterpanel is starting at http://{host}:{port}/"))
        if password:
            self.stdout.write(f"  Log in as {username!r} with password {password!r} (shown only this once).")
        else:
            self.stdout.write(
                f"  Log in as {username!r}. Forgot the password? "
                f"`.venv/bin/python manage.py changepassword {username}`"
            )
        self.stdout.write(f"  Data: {settings.DATA_DIR}   Redis: {redis_url}")
        self.stdout.write("  Press Ctrl-C to stop every panel process.")
