"""docs/monitoring: the scrape config and the Grafana dashboard parse, and name only metrics /metrics has."""

import json
import re

import yaml

from jobs.prometheus import PanelCollector
from tests.conftest import ROOT

DOCS = ROOT / "docs" / "monitoring"
SUFFIXES = {"counter": ["_total"], "histogram": ["_bucket", "_sum", "_count"], "gauge": [""]}


def served_names() -> set[str]:
    return {family.name + suffix for family in PanelCollector().collect() for suffix in SUFFIXES[family.type]}


def test_the_scrape_config_parses_and_scrapes_metrics(db):
    config = yaml.safe_load((DOCS / "prometheus.yml").read_text())
    job = config["scrape_configs"][0]
    assert job["metrics_path"] == "/metrics" and job["authorization"]["type"] == "Bearer"


def test_the_dashboard_and_the_readme_name_only_metrics_that_exist(db):
    served = served_names()
    assert {"clusterpanel_node_up", "clusterpanel_tokens_generated_total",
            "clusterpanel_job_duration_seconds_bucket"} <= served
    dashboard = json.loads((DOCS / "grafana-dashboard.json").read_text())
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    used = {name for expr in exprs for name in re.findall(r"clusterpanel_[a-z_]+", expr)}
    assert used and used <= served, used - served
    readme = (DOCS / "README.md").read_text()
    named = set(re.findall(r"`(clusterpanel_[a-z_]+)`", readme))
    families = {family.name for family in PanelCollector().collect()} | served
    assert named <= families and len(named) >= 10, named - families
    shortened = re.findall(r"`(_[a-z_]+)`", readme)  # "_swap_used_bytes" beside its family's first name
    assert shortened and all(any(name.endswith(short) for name in served) for short in shortened), shortened
