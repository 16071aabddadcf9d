"""docker-compose.yml describes a lab server: web, worker, redis, postgres and a model volume."""

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def test_it_defines_the_services_of_a_lab_server():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    assert {"web", "worker", "redis", "postgres"} <= set(services)
    assert "models" in compose["volumes"]
    for name in ("web", "worker"):
        env = services[name]["environment"]
        assert env["DATABASE_URL"].startswith("postgres://")
        assert env["REDIS_URL"].startswith("redis://redis:")
        assert any(str(v).startswith("models:") for v in services[name]["volumes"])


def test_it_builds_the_panel_image_with_the_same_rpc_build():
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "scripts/build_llama.py" in dockerfile
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert compose["services"]["web"]["build"]["context"] == "."
