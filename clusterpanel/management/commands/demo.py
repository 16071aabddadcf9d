"""Run the demo laptops for as long as the panel runs (a process of `make run`; see clusterpanel/demo.py)."""

import signal
import threading

from django.core.management.base import BaseCommand

from clusterpanel import demo


class Command(BaseCommand):
    help = "Bring up three simulated laptops with the bundled model deployed; remove them on exit. Needs root."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--reset", action="store_true",
                            help="Remove the demo's laptops and deployments (not var/, nor anyone's work) and exit; "
                                 "the next start makes them anew.")

    def handle(self, **options) -> None:
        if options["reset"]:
            demo.reset()
            self.stdout.write(self.style.SUCCESS("Demo reset: its laptops and deployments are gone; the next "
                                                 "`make run` makes them anew."))
            return
        stopping = threading.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: stopping.set())
        try:
            deployment = demo.start(lambda text: self.stdout.write(text))
            split = ", ".join(f"{s.node.name} ({s.layer_count} layers)" for s in deployment.stages.order_by("position"))
            self.stdout.write(self.style.SUCCESS(f"Demo ready: {deployment.model.name} across {split} — open the "
                                                 "Chat page."))
        except Exception as exc:  # the panel goes on without its demo; say why, and stay up (else restarted)
            self.stderr.write(f"The demo could not start: {exc}. The panel works without it.")
        stopping.wait()
        self.stdout.write("Demo: removing the simulated laptops…")
        demo.stop()
