"""Health of the panel's own parts, each check answering in plain words."""

from dataclasses import dataclass

import redis
from django.conf import settings
from django.db import connection

from clusterpanel.kit import celery


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str


def check_database() -> Check:
    try:
        connection.ensure_connection()
    except Exception as exc:  # any driver error means the same to the admin
        return Check("Database", False, f"cannot connect: {exc}")
    return Check("Database", True, connection.vendor)


def check_redis() -> Check:
    try:
        redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=2).ping()
    except redis.RedisError as exc:
        return Check("Redis", False, f"{settings.REDIS_URL} does not answer: {exc}")
    return Check("Redis", True, settings.REDIS_URL)


def check_workers() -> Check:
    try:
        replies = celery.ping(timeout=1.0)
    except Exception as exc:  # broker down surfaces as various kombu errors
        return Check("Celery workers", False, f"cannot ask the broker: {exc}")
    if not replies:
        return Check("Celery workers", False, "no worker answered within 1 s")
    return Check("Celery workers", True, f"{len(replies)} answering")


def check_runtime() -> Check:
    from nodes.runtime.bundle import RuntimeNotFound, find_bundle

    try:
        bundle = find_bundle()
    except RuntimeNotFound as exc:
        return Check("Laptop runtime bundle", False, str(exc))
    return Check("Laptop runtime bundle", True, bundle.summary)


def check_model() -> Check:
    from models_app.library.bundled import BundledModelMissing, bundled_model_path

    try:
        path = bundled_model_path()
    except BundledModelMissing as exc:
        return Check("Bundled model", False, str(exc))
    return Check("Bundled model", True, f"{path.name} ({path.stat().st_size / 2**20:.0f} MiB)")


def check_llama_cpu() -> Check:
    from models_app.llamacpp import cpucheck

    name = "llama.cpp on this CPU"
    verdict = cpucheck.known()
    if verdict is None:
        return Check(name, True, "Not tried yet: its CPU kernels are tried before the first model loads here.")
    return Check(name, verdict.runs, verdict.detail)


def all_checks() -> list[Check]:
    return [check_database(), check_redis(), check_workers(), check_runtime(), check_model(), check_llama_cpu()]
