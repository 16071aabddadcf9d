from django.core.management.base import BaseCommand

from nodes.models import PanelKey


class Command(BaseCommand):
    help = "Print the panel's public SSH key, to add to a laptop's ~/.ssh/authorized_keys."

    def handle(self, **options) -> None:
        self.stdout.write(PanelKey.get().public_key)
