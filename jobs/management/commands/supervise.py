"""Keep rpc-servers and their SSH tunnels alive, and one engine worker per ready deployment (runs under
`make run`). It lives with the engine, above the laptops: nodes/ knows nothing of deployments."""

from django.core.management.base import BaseCommand

from clusterpanel.kit.service_loop import run_until_stopped
from jobs.engine.workers import Engines
from nodes.servers.supervisor import Supervisor


class Command(BaseCommand):
    help = "Watch every wanted rpc-server once a second; restart it, and its tunnel, when it dies."
    # runpanel, which starts it, has run Django's checks: again here is a third of a second of CPU each start.
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("--interval", type=float, default=1.0)

    def handle(self, interval: float, **options) -> None:
        supervisor, engines = Supervisor(), Engines()
        try:
            run_until_stopped([supervisor.tick, engines.tick], interval)
        finally:
            engines.close()
            supervisor.close()
