"""A laptop's memory reads the same everywhere: binary units named as such (GiB, MiB), never a binary number
under a decimal name ("23.6 GB" in Facts, "23.6 GiB" in the probe's result)."""

import re

from clusterpanel.kit.units import rate, size
from nodes.models import Node, Probe
from tests.conftest import PASSWORD
from tests.nodes.test_doctor import KEY, TROUBLED

FREE = int(23.6 * 2**30)
DECIMAL_NAMES = re.compile(r"\d\s?(KB|MB|GB|TB)\b(?!/s)")  # rates stay decimal: MB/s


def test_it_writes_sizes_in_binary_units_named_as_such():
    assert [size(n) for n in (0, 1, 900, 40 << 10, 512 << 20, FREE, 3 << 40)] == [
        "0 bytes", "1 byte", "900 bytes", "40 KiB", "512 MiB", "23.6 GiB", "3.0 TiB"]


def test_it_shows_one_laptops_free_memory_alike_on_the_list_its_page_and_the_doctor(client, alice):
    node = Node.objects.create(name="lab-one", host="10.0.0.9", username="u", host_key=KEY)
    Probe.objects.create(node=node, facts={**TROUBLED, "ram_available": FREE, "ram_total": 32 * 2**30,
                                           "disk_free": 200 * 2**30})
    client.login(username="alice", password=PASSWORD)
    for url in ("/nodes/", "/nodes/lab-one/", "/nodes/lab-one/doctor/"):
        page = client.get(url).content.decode()
        assert "23.6 GiB" in page, url
        assert not DECIMAL_NAMES.search(page), (url, DECIMAL_NAMES.search(page))


def test_it_writes_a_measured_speed_in_the_unit_that_reads_plainly():
    assert [rate(x) for x in (21.44, 1.0, 0.35, 0.0012, 4.37e-05, 0)] == [
        "21.4 GB/s", "1 GB/s", "350 MB/s", "1.2 MB/s", "43.7 kB/s", "0 kB/s"]


def test_a_very_slow_device_reads_in_kb_s_on_its_laptops_page(client, alice):
    """lavapipe on a busy core measured 4.37e-05 GB/s, and the page said so, in floating-point notation."""
    node = Node.objects.create(name="lab-slow", host="10.0.0.9", username="u", host_key=KEY, speed_gb_s=4.37e-05)
    Probe.objects.create(node=node, facts={**TROUBLED, "ram_available": FREE, "ram_total": 32 * 2**30,
                                           "disk_free": 200 * 2**30})
    client.login(username="alice", password=PASSWORD)
    page = client.get("/nodes/lab-slow/").content.decode()
    assert "43.7 kB/s" in page and "e-05" not in page
