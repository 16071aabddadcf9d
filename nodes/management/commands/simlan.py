"""`simlan up N` / `down` / `status`: a simulated laptop LAN for trying the panel without laptops."""

from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from nodes.simlan.lan import Lan, SimLan, SimLanError


class Command(BaseCommand):
    help = "Create, inspect or remove simulated laptops (network namespaces with their own sshd). Needs root."

    def add_arguments(self, parser):
        parser.add_argument("action", choices=["up", "down", "status"])
        parser.add_argument("count", nargs="?", type=int, default=3, help="laptops to create (up)")
        parser.add_argument("--name", default="lab", help="name of the LAN (default: lab)")
        parser.add_argument("--subnet", default="10.231.0.0/24")
        parser.add_argument("--rate", help="cap each link, e.g. 1gbit or 100mbit")
        parser.add_argument("--memory", help="RAM per laptop, e.g. 2G (a cgroup limit)")
        parser.add_argument("--cpus", type=float, help="CPU per laptop in cores, e.g. 0.5")

    def handle(self, action: str, count: int, name: str, subnet: str, **options) -> None:
        try:
            lan = SimLan(name, Path(settings.DATA_DIR) / "simlan", subnet)
            if action == "up":
                self.show(lan.up(count, options["rate"], options["memory"], options["cpus"]))
            elif action == "down":
                removed = lan.down()
                self.stdout.write(f"Removed {len(removed)} things." if removed else "Nothing to remove.")
            else:
                state = lan.status()
                self.show(state) if state else self.stdout.write(f"No simulated LAN named {name!r} is up.")
        except SimLanError as exc:
            raise CommandError(str(exc)) from None

    def show(self, lan: Lan) -> None:
        self.stdout.write(f"LAN {lan.name}: {len(lan.laptops)} laptops on {lan.subnet} "
                          f"(bridge {lan.bridge}{', ' + lan.rate + ' per link' if lan.rate else ''})")
        for laptop in lan.laptops:
            self.stdout.write(f"  {laptop.name:<10} {laptop.address:<15} user {laptop.user:<16} "
                              f"host key {laptop.host_key_fingerprint}")
        self.stdout.write(f"SSH key: {lan.key_path}\nPublic key: {lan.public_key}")
        self.stdout.write(f"Known hosts: {lan.known_hosts}\nTry: ssh -i {lan.key_path} "
                          f"-o UserKnownHostsFile={lan.known_hosts} "
                          f"{lan.laptops[0].user}@{lan.laptops[0].address} uname -a")
