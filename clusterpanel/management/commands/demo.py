"""Run the demo laptops for as long as the panel runs (a process of `make run`; see clusterpanel/demo.py)."""

import signal
import threading

from django.core.management.base import BaseCommand

from clusterpanel import demo


class Command(BaseCommand):
    help = "Bring up three simulated laptops with the bundled model deployed; remove them on exit. Needs root."

    def handle(self, **options) -> None:
        stopping = threading.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: stopping.set())
        try:
            deployment = demo.start(lambda text: self.stdout.write(text))
            self.stdout.write(self.style.SUCCESS(
                f"Demo ready: {deployment.model.name} across {', '.join(s.node.name for s in deployment.stages.all())}"
                " — open the Chat page."))
        except Exception as exc:  # the panel goes on without its demo; say why, and stay up (honcho)
            self.stderr.write(f"The demo could not start: {exc}. The panel works without it.")
        stopping.wait()
        self.stdout.write("Demo: removing the simulated laptops…")
        demo.stop()
