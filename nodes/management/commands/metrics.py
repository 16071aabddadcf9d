"""Stream every laptop's CPU, memory and network once a second (runs under `make run`)."""

from django.core.management.base import BaseCommand

from clusterpanel.kit.service_loop import run_until_stopped
from nodes.metrics.collector import Collector


class Command(BaseCommand):
    help = "Sample every laptop over SSH, keep the last hour in Redis and push samples to browsers."
    # runpanel, which starts it, has run Django's checks: again here is a third of a second of CPU each start.
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("--interval", type=float, default=1.0, help="seconds between samples")

    def handle(self, interval: float, **options) -> None:
        collector = Collector(interval)
        try:
            run_until_stopped([collector.tick], 0.25)
        finally:
            collector.close()
