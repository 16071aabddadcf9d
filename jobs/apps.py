from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "jobs"
    verbose_name = "Jobs"

    def ready(self) -> None:
        from jobs import deployment_jobs
        from models_app.deploying import jobs_above
        from nodes.laptops import holds
        from nodes.probing import speed

        jobs_above.verify.answer(deployment_jobs.verify)
        jobs_above.in_flight.answer(deployment_jobs.in_flight)
        jobs_above.slot_jobs.answer(deployment_jobs.slot_jobs)

        speed.run_bundled.answer(run_bundled)
        holds.moved.answer(laptop_moved)


def run_bundled(endpoint: str, tokens: int) -> tuple[float, int]:
    from jobs.engine import speedtest  # gguf and numpy load when a speed is measured, not in every manage.py

    return speedtest.run_bundled(endpoint, tokens)


def laptop_moved(node, was: str) -> list[str]:
    from jobs.engine import moves  # the engine's modules load where a laptop moves, not in every manage.py

    return moves.laptop_moved(node, was)
