"""Stream every laptop's CPU, memory and network once a second (runs under `make run`)."""

import signal
import time

from django.core.management.base import BaseCommand

from nodes.collector import Collector


class Command(BaseCommand):
    help = "Sample every laptop over SSH, keep the last hour in Redis and push samples to browsers."

    def add_arguments(self, parser):
        parser.add_argument("--interval", type=float, default=1.0, help="seconds between samples")

    def handle(self, interval: float, **options) -> None:
        collector, running = Collector(interval), [True]
        signal.signal(signal.SIGTERM, lambda *_: running.clear())
        try:
            while running:
                collector.tick()
                time.sleep(0.25)
        except KeyboardInterrupt:
            pass
        finally:
            collector.close()
