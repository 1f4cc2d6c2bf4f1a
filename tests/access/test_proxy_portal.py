"""The whole path, with nothing stood in: a real oauth2-proxy (stack/authproxy.py, the pod's
configuration from portal/access/proxy.py) in front of a small local application, logging users
in against the live portal (live_server) and its real Keystone.

anonymous → the portal's login; a member of the tenant → through; a member of another tenant →
the portal's 403 page; a bearer token the portal issued for the workload → through; removed
from the project or signed out of the portal → refused at the proxy's next refresh, within a
minute; the portal unreachable → admitted sessions keep working until their ID token expires."""

from __future__ import annotations

import dataclasses
import re
import socket
import threading
import time
import uuid
from urllib.parse import urlparse

import pytest
import requests
from django.test import TestCase

from portal.access.services import workload_proxy
from portal.keystone import assignments
from portal.workloads.models import Workload
from stack.authproxy import AuthProxy
from stack.identities import admin_client
from tests.access.test_proxy_binary import HTML, JSON, Application
from tests.workloads.api_calls import vision_lab_ready

pytestmark = [pytest.mark.django_db(transaction=True, serialized_rollback=True),
              pytest.mark.timeout(240)]

RECHECK = 2  # seconds between the proxy's refreshes in these tests (60 on a real site)


class Relay:
    """A TCP relay to the portal for the proxy's own calls (token, keys): closing it is the
    portal becoming unreachable for the proxy while browsers still reach it."""

    def __init__(self, target_port: int) -> None:
        self.target = target_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.open = True
        self.sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if not self.open:
                client.close()
                continue
            upstream = socket.create_connection(("127.0.0.1", self.target))
            self.sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        finally:
            for s in (a, b):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        """Refuse new connections and cut those open (the proxy keeps its connections alive)."""
        self.open = False
        self.listener.close()
        for sock in self.sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()


@pytest.fixture
def issuer(live_server, settings):
    url = f"{live_server.url}/o"
    settings.PORTAL_OIDC_ISSUER = url
    settings.PORTAL_AUTH_PROXY_RECHECK_SECONDS = RECHECK
    settings.OAUTH2_PROVIDER = {**settings.OAUTH2_PROVIDER, "OIDC_ISS_ENDPOINT": url,
                                "ID_TOKEN_EXPIRE_SECONDS": 6, "ACCESS_TOKEN_EXPIRE_SECONDS": 6}
    return url


@pytest.fixture
def application():
    app = Application()
    yield app
    app.server.shutdown()
    app.server.server_close()


@pytest.fixture
def no_role_cache(monkeypatch):
    monkeypatch.setattr(assignments, "ASSIGNMENT_CACHE_SECONDS", 0.001)


@pytest.fixture
def notebook(login, gpu_types, cluster, project_token, issuer, live_server, application,
             tmp_path):
    """researcher's Jupyter, its proxy running on loopback in front of `application`, the
    workload's address being the proxy's. Yields (workload, proxy, relay)."""
    vision_lab_ready(login)
    with TestCase.captureOnCommitCallbacks(execute=False):
        response = requests.post(f"{live_server.url}/api/v1/workloads/", json={
            "name": "nb", "template": "jupyter", "gpu_type": "a100", "gpu_count": 1},
            headers={"X-Auth-Token": project_token("researcher", "vision-lab")}, timeout=30)
    assert response.status_code == 201, response.text
    workload = Workload.objects.get(pk=response.json()["id"])
    spec, secrets = workload_proxy(workload)
    relay = Relay(urlparse(live_server.url).port)
    spec = dataclasses.replace(spec, upstream_port=application.port,
                               backend_url=f"http://127.0.0.1:{relay.port}/o")
    proxy = AuthProxy(spec, secrets={**secrets, "JUPYTER_TOKEN": workload.access_token},
                      workdir=tmp_path / "proxy").start()
    Workload.objects.filter(pk=workload.pk).update(address="127.0.0.1", state="running",
                                                   port=proxy.spec.listen_port)
    workload.refresh_from_db()
    yield workload, proxy, relay
    proxy.stop()
    relay.close()


def portal_login(browser: requests.Session, login_url: str, username: str) -> requests.Response:
    """The portal's login form, as a browser fills it; returns the response to the POST."""
    page = browser.get(login_url, timeout=30)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    return browser.post(login_url, data={
        "csrfmiddlewaretoken": token, "username": username, "domain": "Default",
        "password": f"{username}-demo-pass"}, headers={"Referer": login_url},
        allow_redirects=False, timeout=30)


def sign_in(proxy: AuthProxy, username: str) -> tuple[requests.Session, requests.Response]:
    """Open the workload in a fresh browser and sign in at the portal: returns the browser
    and the last response (the application's page, or the portal's refusal)."""
    browser = requests.Session()
    to_portal = browser.get(proxy.url + "/lab", headers=HTML, allow_redirects=False, timeout=30)
    assert to_portal.status_code == 302
    to_login = browser.get(to_portal.headers["Location"], allow_redirects=False, timeout=30)
    assert to_login.status_code == 302 and "/login/?next=/o/authorize/" in to_login.headers[
        "Location"]
    login_url = requests.compat.urljoin(to_portal.headers["Location"], to_login.headers["Location"])
    response = portal_login(browser, login_url, username)
    assert response.status_code == 302, response.text[:2000]
    response = browser.get(requests.compat.urljoin(login_url, response.headers["Location"]),
                           headers=HTML, timeout=30)  # authorize → callback → /lab
    return browser, response


def test_anonymous_is_sent_to_the_portal_login(notebook, issuer):
    workload, proxy, _ = notebook
    response = requests.get(proxy.url + "/lab", headers=HTML, allow_redirects=False, timeout=30)
    assert response.status_code == 302
    assert response.headers["Location"].startswith(f"{issuer}/authorize/?")
    assert f"client_id={workload.access.client_id}" in response.headers["Location"]
    assert requests.get(proxy.url + "/lab", headers=JSON, timeout=30).status_code == 401


def test_a_member_gets_through_and_jupyter_gets_its_token(notebook, application):
    _, proxy, _ = notebook
    browser, response = sign_in(proxy, "researcher")
    assert response.status_code == 200 and response.text == "hello from the application"
    seen = application.last()
    assert seen["path"] == "/lab"
    assert seen["headers"]["Authorization"] == [f"token {notebook[0].access_token}"]


def test_a_member_of_another_project_gets_the_portals_403(notebook):
    _, proxy, _ = notebook
    _, response = sign_in(proxy, "student")
    assert response.status_code == 403
    assert "You may not open nb" in response.text


def test_a_bearer_token_for_the_workload_gets_through(notebook, project_token, live_server,
                                                      application):
    workload, proxy, _ = notebook
    issued = requests.post(f"{live_server.url}/api/v1/workloads/{workload.pk}/access-token/",
                           headers={"X-Auth-Token": project_token("researcher", "vision-lab")},
                           timeout=30).json()
    response = requests.get(proxy.url + "/api/status", timeout=30,
                            headers={"Authorization": f"Bearer {issued['token']}", **JSON})
    assert response.status_code == 200
    # the application sees Jupyter's token, never the portal's
    assert application.last()["headers"]["Authorization"] == [f"token {workload.access_token}"]
    forged = issued["token"][:-4] + ("AAAA" if not issued["token"].endswith("AAAA") else "BBBB")
    assert requests.get(proxy.url + "/api/status", timeout=30, headers={
        "Authorization": f"Bearer {forged}", **JSON}).status_code == 401


def test_removed_from_the_project_is_refused_within_a_minute(notebook, keystone, no_role_cache):
    workload, proxy, _ = notebook
    ks = admin_client(keystone.url)
    name = f"temp-{uuid.uuid4().hex[:8]}"
    user = ks.users.create(name=name, domain="default", password=f"{name}-demo-pass")
    member = next(r for r in ks.roles.list() if r.name == "member")
    project = workload.tenant.keystone_project_id
    ks.roles.grant(member, user=user, project=project)
    try:
        browser, response = sign_in(proxy, name)
        assert response.status_code == 200
        ks.roles.revoke(member, user=user, project=project)
        removed = time.monotonic()
        while True:  # the browser keeps working on the notebook
            response = browser.get(proxy.url + "/lab", headers=JSON, timeout=30)
            if response.status_code != 200:
                break
            assert time.monotonic() - removed < 60, "still admitted a minute after removal"
            time.sleep(0.5)
        assert response.status_code == 401
        assert time.monotonic() - removed <= RECHECK + 5
        # and signing in again meets the portal's refusal
        page = browser.get(proxy.url + "/lab", headers=HTML, timeout=30)
        assert page.status_code == 403 and "no role in the workload" in page.text
    finally:
        ks.users.delete(user)


def test_signing_out_of_the_portal_ends_the_workload_session(notebook, live_server):
    _, proxy, _ = notebook
    browser, response = sign_in(proxy, "lead")
    assert response.status_code == 200
    logout = browser.get(f"{live_server.url}/", timeout=30)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', logout.text).group(1)
    browser.post(f"{live_server.url}/logout/", data={"csrfmiddlewaretoken": token},
                 headers={"Referer": f"{live_server.url}/"}, timeout=30)
    time.sleep(RECHECK + 0.5)
    assert browser.get(proxy.url + "/lab", headers=JSON, timeout=30).status_code == 401


def test_the_portal_unreachable_keeps_admitted_sessions_until_their_id_token_expires(notebook):
    _, proxy, relay = notebook
    browser, response = sign_in(proxy, "researcher")
    assert response.status_code == 200
    relay.close()  # the portal is gone for the proxy
    time.sleep(RECHECK + 0.5)
    assert browser.get(proxy.url + "/lab", headers=JSON, timeout=30).status_code == 200
    time.sleep(6)  # the ID token's lifetime in these tests
    assert browser.get(proxy.url + "/lab", headers=JSON, timeout=30).status_code == 401
