"""docs/settings.md lists every environment variable the portal's processes read."""

from __future__ import annotations

import re

from tests.deploy.manifests import REPO

# env.str("NAME", …), env.bool(…), env.db_url(…); os.environ.get("NAME"), os.getenv("NAME")
READS = re.compile(
    r"""(?:\benv\.\w+|os\.environ\.get|os\.getenv)\(\s*["']([A-Z][A-Z0-9_]+)["']"""
)
# the portal's Python (not gpuagent, gpuctl or kubesim: they document their own) and the image's
# gunicorn configuration
SOURCES = [
    *sorted((REPO / "portal").rglob("*.py")),
    *sorted((REPO / "api").rglob("*.py")),
    *sorted((REPO / "tenants").rglob("*.py")),
    REPO / "deploy" / "image" / "gunicorn.conf.py",
]


def variables_read() -> set[str]:
    return {name for path in SOURCES for name in READS.findall(path.read_text())}


def test_the_scan_finds_the_settings():
    found = variables_read()
    assert {"PORTAL_SECRET_KEY", "DATABASE_URL", "KEYSTONE_URL", "PROMETHEUS_MULTIPROC_DIR",
            "WEB_CONCURRENCY"} <= found


def test_every_variable_read_is_documented():
    documented = set(re.findall(r"`([A-Z][A-Z0-9_]+)`",
                                (REPO / "docs" / "settings.md").read_text()))
    missing = sorted(variables_read() - documented)
    assert missing == [], f"add to docs/settings.md: {missing}"
