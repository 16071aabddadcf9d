"""Register a laptop from the command line, like the Add laptop form."""

import getpass
import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from nodes.laptops.registration import RegistrationError, check_fields, register
from nodes.models import ActionKind, Node, NodeAction
from nodes.remote import ssh
from nodes.tasks import run_action


class Command(BaseCommand):
    help = "Register a laptop reached over SSH, pinning its host key, then probe it."
    stealth_options = ("stdin",)

    def add_arguments(self, parser):
        parser.add_argument("--name", required=True)
        parser.add_argument("--host", required=True)
        parser.add_argument("--port", type=int, default=22)
        parser.add_argument("--user", required=True)
        parser.add_argument("--install-dir", default="~/.clusterpanel", help="where the runtime goes on the laptop")
        auth = parser.add_mutually_exclusive_group(required=True)
        auth.add_argument("--key-file", type=Path, help="a private key the laptop accepts (stored encrypted)")
        auth.add_argument("--password", action="store_true",
                          help="log in once with a password (asked for, or read from stdin) to install the panel's key")
        auth.add_argument("--panel-key", action="store_true",
                          help="the panel's own key, already in the laptop's authorized_keys (`manage.py panelkey`)")
        parser.add_argument("--fingerprint", help="the host key fingerprint you expect (SHA256:...)")
        parser.add_argument("--yes", action="store_true", help="trust the host key shown without asking")

    def handle(self, name, host, port, user, key_file, password, panel_key, fingerprint, yes, **options):
        self.stdin = options.get("stdin") or sys.stdin
        node = Node(name=name, host=host, port=port, username=user, install_dir=options["install_dir"])
        try:
            check_fields(node, exclude=("host_key",))  # a hostile host or user is refused before any connection
        except RegistrationError as exc:
            raise CommandError(f"{name} was not registered: {exc}") from None
        if key_file:
            node.private_key = self.read_key(key_file)
        node.host_key = self.confirm_host_key(host, port, fingerprint, yes)
        secret = self.read_password() if password else None
        try:
            register(node, password=secret, probe=False)
        except RegistrationError as exc:
            raise CommandError(f"{name} was not registered: {exc}") from None
        self.stdout.write(self.style.SUCCESS(f"Registered {name} ({user}@{host}:{port})."))
        action = NodeAction.objects.create(node=node, kind=ActionKind.PROBE)
        run_action(action.pk)
        action.refresh_from_db()
        self.stdout.write(f"Probe: {action.message or action.error}")

    def read_key(self, path: Path) -> str:
        try:
            text = path.expanduser().read_text()
        except OSError as exc:
            raise CommandError(f"Cannot read the key file {path}: {exc.strerror}") from None
        try:
            ssh.load_private_key(text)
        except ssh.SSHError as exc:
            raise CommandError(f"{path}: {exc}") from None
        return text

    def confirm_host_key(self, host: str, port: int, expected: str | None, yes: bool) -> str:
        try:
            key = ssh.host_key_of(host, port)
        except ssh.SSHError as exc:
            raise CommandError(str(exc)) from None
        shown = ssh.fingerprint(key)
        self.stdout.write(f"{host} presents host key {shown}")
        if expected:
            if expected.strip() != shown:
                raise CommandError(f"That is not the fingerprint you expected ({expected}); nothing was registered.")
            return key
        if yes:
            return key
        if not self.stdin.isatty():
            raise CommandError("Confirm the host key with --fingerprint SHA256:... (or --yes).")
        if input("Trust this host key? Compare it with `ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub` "
                 "on the laptop. [y/N] ").strip().lower() != "y":
            raise CommandError("Host key not trusted; nothing was registered.")
        return key

    def read_password(self) -> str:
        if self.stdin.isatty():
            return getpass.getpass("Password for the laptop (used once, not stored): ")
        return self.stdin.readline().rstrip("\n")
