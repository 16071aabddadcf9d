"""The panel's image carries the same RPC build as `make run`, and every panel service of docker-compose.yml
runs that one image: llama-cpp-python with RPC for the head, and the laptop runtime where the panel looks."""

import re
from pathlib import Path

from tests.setup.stack import load, panel_services

ROOT = Path(__file__).resolve().parents[2]


def test_it_builds_the_same_rpc_build_and_checks_the_runtime_bundle_is_in_it():
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "python scripts/build_llama.py" in dockerfile
    cache = re.search(r"CLUSTERPANEL_CACHE=(\S+)", dockerfile)
    assert cache, "the build goes to the cache the panel reads (settings.BUILD_CACHE_DIR)"
    assert "find_bundle()" in dockerfile, "the build fails if the panel cannot find the runtime bundle"
    assert "openssh-client" in dockerfile, "the supervisor's tunnels"


def test_every_panel_service_runs_the_one_image_built_here():
    services = panel_services(load())
    assert {spec["build"]["context"] for spec in services.values()} == {"."}
    assert len({spec["image"] for spec in services.values()}) == 1


def test_the_image_leaves_this_machines_secrets_and_virtualenv_out():
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".venv", "var/"} <= set(ignored)
