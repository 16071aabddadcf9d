from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "jobs"
    verbose_name = "Jobs"

    def ready(self) -> None:
        from nodes import speed

        speed.run_with(run_bundled)


def run_bundled(endpoint: str, tokens: int) -> tuple[float, int]:
    from jobs.engine import speedtest  # gguf and numpy load when a speed is measured, not in every manage.py

    return speedtest.run_bundled(endpoint, tokens)

