"""A simulated LAN for benchmarks: brought up for one run and always taken down."""

import os
import sys
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "clusterpanel.settings")


@contextmanager
def bench_lan(count: int, rate: str | None = None, name: str = "bench", subnet: str = "10.235.0.0/24",
              cpus: dict[int, float] | None = None):
    """`cpus`: laptop index → share of one core its cgroup allows (a slow laptop)."""
    import django

    django.setup()
    from django.conf import settings

    from nodes.simlan.lan import SimLan

    harness = SimLan(name, Path(settings.DATA_DIR) / "simlan", subnet=subnet)
    try:
        lan = harness.up(count, rate=rate)
        for index, share in (cpus or {}).items():
            harness.limit(index + 1, lan.laptops[index].sshd_pid, None, share)
        yield lan
    finally:
        harness.down()


def target(lan, laptop):
    from nodes.remote import ssh

    return ssh.SSHTarget(laptop.address, laptop.user, laptop.host_key, private_key=Path(lan.key_path).read_text())


def with_runtime(lan, install_dir: str) -> list:
    """SSH targets of every laptop, each with the runtime of its architecture installed as the panel installs it."""
    from nodes.probing import probe
    from nodes.runtime import install

    nodes = [target(lan, laptop) for laptop in lan.laptops]
    for node in nodes:
        facts = probe.probe(node, install_dir)
        install.install_runtime(node, install_dir, install.bundle_for(facts), facts, lambda *a, **k: None)
    return nodes
