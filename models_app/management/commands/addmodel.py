from django.core.management.base import BaseCommand, CommandError

from models_app.library.adding import LibraryError, register_path


class Command(BaseCommand):
    help = "Add a GGUF file on this machine to the model library (validated; checksummed in the background)."

    def add_arguments(self, parser):
        parser.add_argument("path")
        parser.add_argument("--name", default="")

    def handle(self, path: str, name: str, **options) -> None:
        try:
            model = register_path(path, name)
        except LibraryError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(self.style.SUCCESS(
            f"Added {model.name}: {model.architecture}, {model.n_layer} layers, {model.file_type}, "
            f"{model.size / 2**30:.2f} GiB."))
