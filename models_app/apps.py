from django.apps import AppConfig


class ModelsAppConfig(AppConfig):
    name = "models_app"
    verbose_name = "Models"

    def ready(self) -> None:
        from models_app import cache_use, holding
        from nodes import holds

        holds.answer(holders=holding.holders, used_by=holding.used_by, forget_used=holding.forget_used,
                     losing=holding.losing, cache_needs=cache_use.needs, cache_owners=cache_use.owners)
