"""/api/docs/: Swagger UI for the schema, served from the portal's own static files."""

import re

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def test_the_docs_page_loads_every_asset_from_the_portal_itself():
    response = Client().get("/api/docs/")
    assert response.status_code == 200
    page = response.content.decode()
    assets = re.findall(r'(?:src|href)="([^"]+)"', page)
    assert assets, page[:500]
    # the start script from the page's own address (?script): nothing inline, for the CSP
    assert "<script>" not in page and "<style>" not in page
    script = Client().get("/api/docs/?script=")
    assert script.status_code == 200 and "/api/schema/" in script.content.decode()
    assert script["Content-Type"].startswith("application/javascript")
    for asset in assets:
        assert asset.startswith("/static/") or asset == "/api/docs/?script=", asset  # no CDN
        assert Client().get(asset.replace("&amp;", "&")).status_code == 200, asset
