"""kubesim's own tests: no Django needed (`pytest -p no:django tests/kubesim` works).

The fixtures come from tests/fixtures/kubesim.py. They are imported here rather than named
in `pytest_plugins`, because pytest only honours `pytest_plugins` in the top-level conftest;
once tests/conftest.py registers the plugin these imports are harmless duplicates.
"""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest
from kubernetes import client

from tests.fixtures.kubesim import (  # noqa: F401 - fixtures
    KubesimServer,
    kube_namespace,
    kubesim,
    kubesim_factory,
)


class Raw:
    """Plain HTTP against kubesim, for what the official client hides (status bodies,
    headers, malformed input)."""

    def __init__(self, server: KubesimServer) -> None:
        self.server = server

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        headers: dict[str, str] | None = None,
        timeout: float = 10.0,
    ) -> tuple[int, dict[str, str], bytes]:
        data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.server.url + path, data=data, method=method)
        req.add_header("Content-Type", content_type)
        for k, v in {**self.server.headers(), **(headers or {})}.items():
            req.add_header(k, v)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return resp.status, dict(resp.headers), resp.read()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read()

    def json(self, method: str, path: str, body: Any = None, **kw: Any) -> tuple[int, Any]:
        status, _, data = self.request(method, path, body, **kw)
        return status, json.loads(data) if data else None


@pytest.fixture(scope="session")
def raw(kubesim: KubesimServer) -> Raw:  # noqa: F811 - the fixture imported above
    return Raw(kubesim)


@pytest.fixture(scope="session")
def api_client(kubesim: KubesimServer):  # noqa: F811 - the fixture imported above
    with kubesim.api_client() as client:
        yield client


@pytest.fixture(scope="session", autouse=True)
def redis_server():
    """kubesim needs no Redis: this shadows the portal stack's autouse Redis fixture
    (tests/fixtures/stack.py) for the tests in this directory."""
    return None


# the official client's API groups over the session's kubesim (files with a kubesim of their
# own define `core` & co. over it instead)
@pytest.fixture
def core(api_client):
    return client.CoreV1Api(api_client)


@pytest.fixture
def apps(api_client):
    return client.AppsV1Api(api_client)


@pytest.fixture
def batch(api_client):
    return client.BatchV1Api(api_client)
