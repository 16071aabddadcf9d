import os

from django.core.management.base import BaseCommand

from clusterpanel.accounts.first_admin import ensure_first_admin, password_file


class Command(BaseCommand):
    help = ("Create the first lab admin if there is none (password from ADMIN_PASSWORD, else written to "
            "DATA_DIR/first_admin_password, readable only by its owner).")

    def handle(self, **options) -> None:
        # The password itself is never printed: this runs under docker compose, which keeps its output.
        username, password = ensure_first_admin()
        if password is None:
            self.stdout.write(f"Lab admin {username!r} already exists.")
        elif os.environ.get("ADMIN_PASSWORD"):
            self.stdout.write(f"Created lab admin {username!r} with the password in ADMIN_PASSWORD.")
        else:
            self.stdout.write(f"Created lab admin {username!r}. Its password is in {password_file()} (readable "
                              "only by its owner); log in and change it, and that file goes at the next start.")
