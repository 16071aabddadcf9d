"""Keep rpc-servers and their SSH tunnels alive, and one engine worker per ready deployment (runs under
`make run`)."""

import signal
import time

from django.core.management.base import BaseCommand
from django.db import close_old_connections

from jobs.engines import Engines
from nodes.supervisor import Supervisor


class Command(BaseCommand):
    help = "Watch every wanted rpc-server once a second; restart it, and its tunnel, when it dies."

    def add_arguments(self, parser):
        parser.add_argument("--interval", type=float, default=1.0)

    def handle(self, interval: float, **options) -> None:
        supervisor, engines, running = Supervisor(), Engines(), [True]
        signal.signal(signal.SIGTERM, lambda *_: running.clear())
        try:
            while running:
                close_old_connections()
                supervisor.tick()
                engines.tick()
                time.sleep(interval)
        except KeyboardInterrupt:
            pass
        finally:
            engines.close()
            supervisor.close()
