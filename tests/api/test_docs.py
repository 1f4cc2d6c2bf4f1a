"""/api/docs/: Swagger UI for the schema, served from the portal's own static files."""

import re

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def test_the_docs_page_loads_every_asset_from_the_portal_itself():
    response = Client().get("/api/docs/")
    assert response.status_code == 200
    page = response.content.decode()
    assert "/api/schema/" in page
    assets = re.findall(r'(?:src|href)="([^"]+)"', page)
    assert assets, page[:500]
    for asset in assets:
        assert asset.startswith("/static/"), asset  # no CDN
        assert Client().get(asset).status_code == 200, asset
