"""Fixtures of the proxy tests: the application behind a proxy, and real workloads whose real
proxies sign users in against the live portal (tests/access/proxies.py has the helpers)."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable
from typing import NamedTuple
from urllib.parse import urlparse

import pytest
import requests
from django.test import TestCase

from access.proxy import CLIENT_SECRET_KEY
from stack.authproxy import AuthProxy
from stack.identities import admin_client
from tests.access.proxies import ID_TOKEN_SECONDS, RECHECK, Application, Relay
from tests.workloads.api_calls import vision_lab_ready
from workloads.access import workload_proxy
from workloads.models import Workload


@pytest.fixture
def application():
    app = Application()
    yield app
    app.stop()


@pytest.fixture
def issuer(live_server, settings):
    """The live portal as the OpenID Connect provider, its re-check and ID tokens short."""
    url = f"{live_server.url}/o"
    settings.PORTAL_OIDC_ISSUER = url
    settings.PORTAL_AUTH_PROXY_RECHECK_SECONDS = RECHECK
    settings.OAUTH2_PROVIDER = {**settings.OAUTH2_PROVIDER, "OIDC_ISS_ENDPOINT": url,
                                "ID_TOKEN_EXPIRE_SECONDS": ID_TOKEN_SECONDS,
                                "ACCESS_TOKEN_EXPIRE_SECONDS": ID_TOKEN_SECONDS}
    return url


class Notebook(NamedTuple):
    workload: Workload
    proxy: AuthProxy  # proxy.secrets: the workload's Secret as the proxy got it
    relay: Relay  # the proxy's way to the portal


@pytest.fixture
def launch_notebook(login, gpu_types, cluster, project_token, issuer, live_server, application,
                    tmp_path):
    """Launch researcher's Jupyter in vision-lab through the API, and start its proxy on
    loopback in front of `application`, the workload's address being the proxy's. Each call
    is another workload, with its own client, secrets and proxy."""
    vision_lab_ready(login)
    started: list[Notebook] = []

    def launch(name: str = "nb", *, client_secret: str | None = None) -> Notebook:
        """`client_secret` replaces the one the portal derived, at the portal and the proxy."""
        with TestCase.captureOnCommitCallbacks(execute=False):
            response = requests.post(f"{live_server.url}/api/v1/workloads/", json={
                "name": name, "template": "jupyter", "gpu_type": "a100", "gpu_count": 1},
                headers={"X-Auth-Token": project_token("researcher", "vision-lab")}, timeout=30)
        assert response.status_code == 201, response.text
        workload = Workload.objects.get(pk=response.json()["id"])
        spec, secrets = workload_proxy(workload)
        if client_secret is not None:
            client = workload.access.application
            client.client_secret = client_secret  # saved hashed, as a derived one
            client.save()
            secrets[CLIENT_SECRET_KEY] = client_secret
        relay = Relay(urlparse(live_server.url).port)
        spec = dataclasses.replace(spec, upstream_port=application.port,
                                   backend_url=f"http://127.0.0.1:{relay.port}/o")
        proxy = AuthProxy(spec, secrets={**secrets, "JUPYTER_TOKEN": workload.access_token},
                          workdir=tmp_path / f"proxy-{name}")
        started.append(Notebook(workload, proxy, relay))
        proxy.start()
        Workload.objects.filter(pk=workload.pk).update(address="127.0.0.1", state="running",
                                                       port=proxy.spec.listen_port)
        workload.refresh_from_db()
        return started[-1]

    yield launch
    for notebook in started:
        notebook.proxy.stop()
        notebook.relay.close()


@pytest.fixture
def notebook(launch_notebook) -> Notebook:
    """researcher's Jupyter "nb" behind its proxy: (workload, proxy, relay)."""
    return launch_notebook()


class TemporaryMember(NamedTuple):
    name: str  # its password: "<name>-demo-pass", as the demo users'
    remove: Callable[[], None]  # revoke its role in the project, in Keystone


@pytest.fixture
def temporary_member(keystone):
    """make(project_id): a Keystone user made for the test, a member of that project until its
    `remove()`; every one made is deleted after the test."""
    ks = admin_client(keystone.url)
    member = next(r for r in ks.roles.list() if r.name == "member")
    made = []

    def make(project_id: str) -> TemporaryMember:
        name = f"temp-{uuid.uuid4().hex[:8]}"
        user = ks.users.create(name=name, domain="default", password=f"{name}-demo-pass")
        made.append(user)
        ks.roles.grant(member, user=user, project=project_id)
        return TemporaryMember(name, lambda: ks.roles.revoke(member, user=user,
                                                             project=project_id))

    yield make
    for user in made:
        ks.users.delete(user)
