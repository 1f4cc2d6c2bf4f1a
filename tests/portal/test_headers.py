"""What a browser or a proxy may keep and run of the portal's answers: a Content-Security-Policy
on every page (django-csp, portal/settings.py) that the templates can live with (no inline
script, style or event handler), and `Cache-Control: no-store` on every page and API answer
(portal/headers.py), static files excepted."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from stack.procs import REPO

pytestmark = pytest.mark.django_db

TEMPLATES = REPO / "templates"
# inline code a policy without 'unsafe-inline' refuses: a <script> without src, a <style>, a
# style="" attribute, an on…="" event handler, a javascript: address, htmx's eval (hx-on, js:)
INLINE = {
    "inline script": re.compile(r"<script(?![^>]*\bsrc=)[^>]*>", re.I),
    "style element": re.compile(r"<style\b", re.I),
    "style attribute": re.compile(r"\sstyle\s*=", re.I),
    "event handler": re.compile(r"\son[a-z]+\s*=", re.I),
    "javascript: address": re.compile(r"javascript:", re.I),
    "htmx eval": re.compile(r"\shx-on[:-]|\bjs:", re.I),
}


def csp(response) -> dict[str, list[str]]:
    header = response["Content-Security-Policy"]
    return {name: values for name, *values in (part.split() for part in header.split(";")
                                               if part.strip())}


def assert_strict(response) -> None:
    policy = csp(response)
    assert policy["script-src"] == ["'self'"] and policy["style-src"] == ["'self'"], policy
    assert policy["default-src"] == ["'self'"] and policy["object-src"] == ["'none'"]
    assert policy["frame-ancestors"] == ["'none'"] and policy["base-uri"] == ["'none'"]
    assert "'unsafe-inline'" not in response["Content-Security-Policy"]
    assert "'unsafe-eval'" not in response["Content-Security-Policy"]


def assert_no_store(response) -> None:
    assert "no-store" in response["Cache-Control"], response.get("Cache-Control")


@pytest.mark.parametrize("path", sorted(str(p.relative_to(TEMPLATES))
                                        for p in TEMPLATES.rglob("*.html")))
def test_no_template_holds_inline_code(path):
    text = (TEMPLATES / path).read_text()
    found = {what: pattern.findall(text) for what, pattern in INLINE.items()}
    assert not any(found.values()), {what: hits for what, hits in found.items() if hits}


def test_the_login_page_has_the_policy_and_is_not_stored():
    response = Client().get("/login/")
    assert response.status_code == 200
    assert_strict(response)
    assert_no_store(response)


def test_signed_in_pages_have_the_policy_and_are_not_stored(as_user, login, gpu_types, cluster):
    client = as_user("researcher")
    for path in ("/", "/workloads/", "/workloads/new/", "/usage/", "/no-such-page/"):
        response = client.get(path)
        assert response.status_code in (200, 404), (path, response.status_code)
        assert_strict(response)
        assert_no_store(response)
    admin = login("admin")
    for path in ("/admin/tenants/", "/admin/templates/", "/admin/audit/"):
        response = admin.get(path)
        assert response.status_code == 200, path
        assert_strict(response)
        assert_no_store(response)


def test_the_whole_api_is_not_stored(api_headers):
    headers = api_headers("researcher")
    for path in ("/api/v1/me/", "/api/v1/templates/", "/api/v1/workloads/", "/api/v1/nope/",
                 "/api/schema/", "/api/docs/"):
        response = Client().get(path, **headers)
        assert response.status_code in (200, 404), (path, response.status_code)
        assert_no_store(response)
    assert_strict(Client().get("/api/docs/"))


def test_static_files_keep_their_own_caching():
    page = Client().get("/login/").content.decode()
    stylesheet = re.search(r'href="(/static/[^"]+\.css)"', page).group(1)
    response = Client().get(stylesheet)
    assert response.status_code == 200
    assert "no-store" not in response.get("Cache-Control", "")
