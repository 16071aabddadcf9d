"""Laptop lists in nodes sort as people count them (hid5-2 before hid5-10): the Laptops page, the doctor, the
recent samples the charts start from."""

import re

import pytest
from django.test import Client

from nodes.models import Node
from tests.rows import HOST_KEY

NAMES = ["hid5-10", "hid5-2", "hid5-1", "lab-3"]
IN_ORDER = ["hid5-1", "hid5-2", "hid5-10", "lab-3"]


@pytest.fixture
def admin(alice) -> Client:
    for i, name in enumerate(NAMES):
        # a pipeline place must not reorder a list of laptops: it orders pipelines
        Node.objects.create(name=name, host=f"192.0.2.{i + 1}", username="lab", host_key=HOST_KEY,
                            pipeline_order=len(NAMES) - i)
    client = Client()
    client.force_login(alice)
    return client


def test_the_laptops_page_lists_them_naturally(admin):
    assert re.findall(r'data-node="([^"]+)"', admin.get("/nodes/").content.decode()) == IN_ORDER


def test_the_doctor_lists_them_naturally(admin):
    page = admin.get("/nodes/doctor/").content.decode()
    assert re.findall(r'<h2><a href="/nodes/([^/]+)/">', page) == IN_ORDER


def test_recent_samples_list_them_naturally(admin):
    assert [n["name"] for n in admin.get("/nodes/metrics/recent.json").json()["nodes"]] == IN_ORDER
