import os

from celery import shared_task

from clusterpanel.accounts.models import User
from clusterpanel.status import check_database


@shared_task
def health() -> dict:
    """What a worker sees: its process, the database, and how many accounts it holds."""
    return {"pid": os.getpid(), "database": check_database().ok, "users": User.objects.count()}
