from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "jobs"
    verbose_name = "Jobs"

    def ready(self) -> None:
        from nodes import holds, speed

        speed.run_with(run_bundled)
        holds.answer(moved=laptop_moved)


def run_bundled(endpoint: str, tokens: int) -> tuple[float, int]:
    from jobs.engine import speedtest  # gguf and numpy load when a speed is measured, not in every manage.py

    return speedtest.run_bundled(endpoint, tokens)


def laptop_moved(node, was: str) -> list[str]:
    from jobs.engine import moves  # the engine's modules load where a laptop moves, not in every manage.py

    return moves.laptop_moved(node, was)
