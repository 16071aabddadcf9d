from django import template

from models_app.deploying import activity

register = template.Library()


@register.filter
def engine_load(engine: dict | None) -> dict | None:
    """`{% with load=deployment.engine|engine_load %}`: its slots and tokens/s now
    (models_app/deploying/activity.py)."""
    return activity.engine_load(engine)
