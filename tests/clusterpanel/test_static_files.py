"""Chart pages load a plotly.js of the trace types the panel draws (not the whole 4.8 MB one), and every script
and stylesheet under a name that changes with its content, which browsers keep for good instead of asking
again after 60 s."""

import re

import requests
from django.test import Client

from clusterpanel.accounts.models import Role, User
from models_app.library.adding import ensure_bundled
from tests.conftest import PASSWORD

FOREVER = 365 * 24 * 3600


def own_assets(web_server: str) -> list[str]:
    admin = User.objects.create_user("dora", password=PASSWORD, role=Role.ADMIN)
    client = Client()
    client.force_login(admin)
    model = ensure_bundled()  # its page draws a chart
    page = requests.get(f"{web_server}/models/{model.name}/", cookies={"sessionid": client.cookies["sessionid"].value},
                        timeout=30)
    assert page.status_code == 200
    return re.findall(r'(?:src|href)="(/static/[^"]+)"', page.text)


def test_it_serves_hashed_names_for_a_year_and_more_and_the_small_plotly(web_server):
    assets = own_assets(web_server)
    assert any("/vendor/plotly-basic.min." in a for a in assets) and not any("plotly.min" in a for a in assets)
    for asset in assets:
        assert re.search(r"\.[0-9a-f]{12}\.\w+$", asset), f"{asset} has no hash in its name"
        response = requests.get(web_server + asset, headers={"Accept-Encoding": "gzip"}, timeout=30)
        cache = response.headers["Cache-Control"]
        assert "immutable" in cache and int(re.search(r"max-age=(\d+)", cache)[1]) >= FOREVER, (asset, cache)
        if asset.endswith(".js"):
            imports = re.findall(r'from "(\./[^"]+)"', response.text)
            assert all(re.search(r"\.[0-9a-f]{12}\.js$", i) for i in imports), (asset, imports)
        if "plotly" in asset:
            assert response.headers["Content-Encoding"] == "gzip" and int(response.headers["Content-Length"]) < 450_000
