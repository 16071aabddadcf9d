"""Which of llama.cpp's CPU kernels run on this machine (models_app/llamacpp/cpucheck.py): tried once per CPU and
build."""

from django.core.management.base import BaseCommand, CommandError

from models_app.llamacpp import cpucheck


class Command(BaseCommand):
    help = "Try llama.cpp's CPU kernels here in throwaway processes and say how models will load."
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("--again", action="store_true", help="forget the kept verdict and try again")

    def handle(self, again: bool, **options) -> None:
        if again:
            (cpucheck.data_dir() / cpucheck.FILE).unlink(missing_ok=True)
        verdict = cpucheck.verdict()
        if not verdict.runs:
            raise CommandError(verdict.detail)
        self.stdout.write(verdict.detail)
