from django.core.management.base import BaseCommand

from clusterpanel.accounts import ensure_first_admin


class Command(BaseCommand):
    help = "Create the first lab admin if there is none (password from ADMIN_PASSWORD, else printed once)."

    def handle(self, **options) -> None:
        username, password = ensure_first_admin()
        if password:
            self.stdout.write(f"Created lab admin {username!r} with password {password!r} (shown only this once).")
        else:
            self.stdout.write(f"Lab admin {username!r} already exists.")
