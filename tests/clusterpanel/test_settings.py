"""Settings come from the environment; with nothing set, the panel still runs."""

import json
import os
import stat
import subprocess
import sys

from django.conf import settings

SHOW = ("import django, json; django.setup(); from django.conf import settings as s; "
        "print(json.dumps({'debug': s.DEBUG, 'db': s.DATABASES['default']['ENGINE'], "
        "'name': str(s.DATABASES['default']['NAME']), 'redis': s.REDIS_URL, 'key': s.SECRET_KEY, "
        "'hosts': s.ALLOWED_HOSTS}))")


def settings_with(tmp_path, **env: str) -> dict:
    environment = {k: v for k, v in os.environ.items()
                   if k not in {"REDIS_URL", "DATABASE_URL", "SECRET_KEY", "DEBUG", "ALLOWED_HOSTS"}}
    environment.update(DATA_DIR=str(tmp_path), DJANGO_SETTINGS_MODULE="clusterpanel.settings", **env)
    out = subprocess.run([sys.executable, "-c", SHOW], capture_output=True, text=True, env=environment,
                         cwd=settings.BASE_DIR, check=True).stdout
    return json.loads(out)


def test_it_runs_on_sqlite_in_the_data_folder_by_default(tmp_path):
    found = settings_with(tmp_path)
    assert found["db"] == "django.db.backends.sqlite3"
    assert found["name"] == str(tmp_path / "clusterpanel.sqlite3")
    assert found["debug"] is False
    assert found["redis"] == "redis://127.0.0.1:6390/0"


def test_it_generates_a_secret_key_once_and_keeps_it_private(tmp_path):
    first = settings_with(tmp_path)["key"]
    assert len(first) >= 50
    assert settings_with(tmp_path)["key"] == first
    assert stat.S_IMODE((tmp_path / "secret_key").stat().st_mode) == 0o600


def test_it_takes_postgres_redis_and_hosts_from_the_environment(tmp_path):
    found = settings_with(tmp_path, DATABASE_URL="postgres://panel:pw@db:5432/panel",
                          REDIS_URL="redis://cache:6379/2", SECRET_KEY="k" * 50,
                          ALLOWED_HOSTS="panel.lab,10.0.0.5", DEBUG="yes")
    assert found["db"] == "django.db.backends.postgresql" and found["name"] == "panel"
    assert found["redis"] == "redis://cache:6379/2"
    assert found["hosts"] == ["panel.lab", "10.0.0.5"]
    assert found["debug"] is True
    assert not (tmp_path / "secret_key").exists()


def test_it_follows_the_redis_the_running_panel_chose(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "redis.url").write_text("redis://127.0.0.1:40123/0")
    assert settings_with(tmp_path)["redis"] == "redis://127.0.0.1:40123/0"
