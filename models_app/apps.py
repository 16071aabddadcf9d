from django.apps import AppConfig


class ModelsAppConfig(AppConfig):
    name = "models_app"
    verbose_name = "Models"

    def ready(self) -> None:
        from models_app.deploying import cache_use, holding
        from nodes.laptops import holds

        holds.holders.answer(holding.holders)
        holds.used_by.answer(holding.used_by)
        holds.forget_used.answer(holding.forget_used)
        holds.losing.answer(holding.losing)
        holds.cache_needs.answer(cache_use.needs)
        holds.cache_owners.answer(cache_use.owners)
