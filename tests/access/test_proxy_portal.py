"""The whole path, with nothing stood in: a real oauth2-proxy (stack/authproxy.py, the pod's
configuration from access/proxy.py) in front of a small local application, logging users
in against the live portal (live_server), its real OpenID Connect endpoints (/o/) and its real
Keystone. Workloads are launched through the API (tests/access/conftest.py).

anonymous → the portal's login; a member of the tenant → through, the application seeing its
own token and nothing of the login, the proxy's log nothing secret; a member of another tenant
→ the portal's 403 page; a bearer token the portal issued for the workload → through, any other
(expired, no expiry, another workload's, another issuer's, another key's) → refused; a forged
cookie or another workload's → no session; the portal unreachable at the login's callback → the
proxy's error page; removed from the project or signed out of the portal → refused at the
proxy's next refresh, within a minute; the portal unreachable → admitted sessions keep working
until their ID token expires."""

from __future__ import annotations

import re
import time
import urllib.parse

import pytest
import requests
from jwcrypto import jwk

from access.proxy import CLIENT_SECRET_KEY, cookie_name
from identity import assignments
from tests.access.proxies import (
    HTML,
    ID_TOKEN_SECONDS,
    JSON,
    PROXY_HEADERS,
    RECHECK,
    REFRESH_DUE,
    authorize,
    claims_of,
    code_of,
    mint,
    portal_login,
    session_cookie,
    sign_in,
)
from tests.support.waiting import eventually
from workloads.models import ProxySession

pytestmark = [pytest.mark.django_db(transaction=True, serialized_rollback=True),
              pytest.mark.timeout(240)]


@pytest.fixture
def no_role_cache(monkeypatch):
    monkeypatch.setattr(assignments, "ASSIGNMENT_CACHE_SECONDS", 0.001)


def test_anonymous_is_sent_to_the_portal_login(notebook, issuer):
    workload, proxy, _ = notebook
    response = requests.get(proxy.url + "/lab", headers=HTML, allow_redirects=False, timeout=30)
    assert response.status_code == 302
    assert response.headers["Location"].startswith(f"{issuer}/authorize/?")
    assert f"client_id={workload.access.client_id}" in response.headers["Location"]
    assert requests.get(proxy.url + "/lab", headers=JSON, timeout=30).status_code == 401


def test_a_member_gets_through_and_jupyter_gets_its_token(notebook, application):
    workload, proxy, relay = notebook
    browser, answer = authorize(proxy, "researcher")
    assert answer.status_code == 302
    code = code_of(answer)
    callback = browser.get(answer.headers["Location"], allow_redirects=False, timeout=30)
    assert callback.status_code == 302, callback.text
    assert callback.headers["Location"] == "/lab"
    # the code was redeemed, and the proxy session tied to the portal session it came from
    session = ProxySession.objects.get(workload=workload)
    assert session.code is None and session.token_family is not None
    # the cookie: its own name, not Secure over plain HTTP, HttpOnly, SameSite=Lax
    cookie = session_cookie(browser, proxy)
    assert cookie is not None and not cookie.secure
    assert cookie.has_nonstandard_attr("HttpOnly")
    assert cookie.get_nonstandard_attr("SameSite").lower() == "lax"
    # the client's own Authorization is replaced by Jupyter's token, never added to
    response = browser.get(proxy.url + "/lab", headers={**HTML, "Authorization": "Bearer a"},
                           timeout=30)
    assert (response.status_code, response.text) == (200, "hello from the application")
    seen = application.last()
    assert seen["path"] == "/lab"
    assert seen["headers"]["Authorization"] == [f"token {workload.access_token}"]
    assert not set(seen["headers"]) & set(PROXY_HEADERS)
    # the browser's cookies go on to the application (Jupyter has its own); the proxy's is
    # encrypted with the cookie secret, which only the proxy holds
    assert f"{cookie_name(proxy.spec)}=" in seen["headers"]["Cookie"][0]
    # a signed-in browser whose page sends the application's own Authorization (JupyterLab
    # sends "token …") is not refused for it
    again = browser.get(proxy.url + "/api/contents", timeout=30,
                        headers={**JSON, "Authorization": "token t"})
    assert again.status_code == 200
    # nothing secret in the proxy's log: not the code, the tokens, the secrets, the cookie
    issued = relay.tokens()  # what the portal's token endpoint gave the proxy
    assert set(issued) == {"access_token", "refresh_token", "id_token"}
    tokens = [token for of_kind in issued.values() for token in of_kind]
    log = proxy.log_text()
    assert log
    for secret in [code, *tokens, *proxy.secrets.values(), cookie.value]:
        assert secret not in log
    assert "eyJ" not in log  # no JWT: not the ID token
    assert "/oauth2/callback" not in log and "code=" not in log


def test_a_member_of_another_project_gets_the_portals_403(notebook):
    _, proxy, _ = notebook
    _, response = sign_in(proxy, "student")
    assert response.status_code == 403
    assert "You may not open nb" in response.text


def test_a_client_secret_of_yaml_and_shell_characters_reaches_the_portal_intact(
        launch_notebook):
    # quotes, a colon, a hash, a dollar, a backslash and spaces: the proxy's configuration file
    # keeps it one literal string, and it goes form-encoded in the token request's Basic auth
    _, proxy, _ = launch_notebook(client_secret='se"cr: #et $1 \\x')
    assert proxy.secrets[CLIENT_SECRET_KEY] == 'se"cr: #et $1 \\x'
    _, response = sign_in(proxy, "researcher")
    assert (response.status_code, response.text) == (200, "hello from the application")


def test_a_bearer_token_passes_only_when_the_portal_signed_it_for_this_workload_and_it_is_live(
        launch_notebook, project_token, live_server, application, issuer):
    workload, proxy, _ = launch_notebook("nb")
    other, other_proxy, _ = launch_notebook("nb2")
    researcher = {"X-Auth-Token": project_token("researcher", "vision-lab")}

    def issued(workload) -> str:
        response = requests.post(f"{live_server.url}/api/v1/workloads/{workload.pk}/access-token/",
                                 headers=researcher, timeout=30)
        assert response.status_code in (200, 201), response.text
        return response.json()["token"]

    def status(proxy, token: str) -> int:
        return requests.get(proxy.url + "/api/kernels", timeout=30, headers={
            "Authorization": f"Bearer {token}", **JSON}).status_code

    def refused(token: str) -> None:
        assert status(proxy, token) == 401  # a script
        browser = requests.get(proxy.url + "/lab", allow_redirects=False, timeout=30,
                               headers={"Authorization": f"Bearer {token}", **HTML})
        assert browser.status_code == 302  # a browser: the portal's login
        assert browser.headers["Location"].startswith(f"{issuer}/authorize/?")

    token, other_token = issued(workload), issued(other)
    count = len(application.requests)
    assert status(proxy, token) == 200
    # the application sees Jupyter's token, never the portal's
    assert application.last()["headers"]["Authorization"] == [f"token {workload.access_token}"]
    # the same claims signed again with the portal's key pass: each token below differs from a
    # good one in what its comment says, and only that
    claims = claims_of(token)
    assert claims["aud"] == workload.access.client_id and claims["iss"] == issuer
    assert status(proxy, mint(claims)) == 200
    now = int(time.time())
    refused(mint({**claims, "iat": now - 120, "nbf": now - 120, "exp": now - 60}))  # expired
    refused(mint({k: v for k, v in claims.items() if k != "exp"}))  # no expiry at all
    refused(mint({**claims, "iss": "http://elsewhere.invalid/o"}))  # another issuer
    # signed with another key that says it is the portal's (its kid)
    refused(mint(claims, key=jwk.JWK.generate(kty="RSA", size=2048)))
    refused(token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB"))  # signature broken
    # another workload's real token: good at its own proxy, refused at this one
    assert claims_of(other_token)["aud"] == other.access.client_id
    assert status(other_proxy, other_token) == 200
    refused(other_token)
    assert len(application.requests) == count + 3  # only the three that passed reached it


def test_a_forged_cookie_or_another_workloads_cookie_is_no_session(launch_notebook, application,
                                                                   issuer):
    _, proxy, _ = launch_notebook("nb")
    _, other, _ = launch_notebook("nb2")
    browser, response = sign_in(proxy, "researcher")
    assert response.status_code == 200
    name, value = cookie_name(proxy.spec), session_cookie(browser, proxy).value
    assert cookie_name(other.spec) != name
    # the cookie alone is the session
    assert requests.get(proxy.url + "/", headers=JSON, cookies={name: value},
                        timeout=30).status_code == 200
    count = len(application.requests)
    forged = value[:-4] + ("AAAA" if not value.endswith("AAAA") else "BBBB")
    for cookie in (forged, "garbage"):
        answer = requests.get(proxy.url + "/", headers=JSON, cookies={name: cookie}, timeout=30)
        assert answer.status_code == 401
        answer = requests.get(proxy.url + "/", headers=HTML, cookies={name: cookie},
                              allow_redirects=False, timeout=30)
        assert answer.status_code == 302
        assert answer.headers["Location"].startswith(f"{issuer}/authorize/?")
    # the browser signed in at nb opens nb2 (the same host: it sends nb's cookie there too)
    assert browser.get(other.url + "/", headers=JSON, timeout=30).status_code == 401
    # nb's cookie under nb2's name: nb2's cookie secret does not open it
    assert requests.get(other.url + "/", headers=JSON, cookies={cookie_name(other.spec): value},
                        timeout=30).status_code == 401
    assert len(application.requests) == count


def test_the_portal_down_when_the_browser_comes_back_with_its_code_ends_on_the_proxys_page(
        notebook, application):
    workload, proxy, relay = notebook
    browser, answer = authorize(proxy, "researcher")
    assert answer.status_code == 302  # the portal admitted the user; the code is on its way
    count = len(application.requests)
    relay.close()  # the proxy cannot redeem it
    callback = browser.get(answer.headers["Location"], allow_redirects=False, timeout=30)
    assert callback.status_code == 500
    assert "Signing in to this workload could not be finished: the portal did not answer" \
        in callback.text
    assert "Request ID:" in callback.text
    assert f"{cookie_name(proxy.spec)}=" not in callback.headers.get("Set-Cookie", "")
    assert session_cookie(browser, proxy) is None
    assert len(application.requests) == count
    assert ProxySession.objects.get(workload=workload).token_family is None  # never redeemed


def test_removed_from_the_project_is_refused_within_a_minute(notebook, no_role_cache,
                                                            temporary_member):
    workload, proxy, _ = notebook
    user = temporary_member(workload.tenant.keystone_project_id)
    browser, response = sign_in(proxy, user.name)
    assert response.status_code == 200
    user.remove()
    removed = time.monotonic()

    def refusal() -> int | None:  # the browser keeps working on the notebook
        status = browser.get(proxy.url + "/lab", headers=JSON, timeout=30).status_code
        return status if status != 200 else None

    status = eventually(refusal, timeout=60, interval=0.5,
                        message="still admitted a minute after removal")
    assert status == 401
    assert time.monotonic() - removed <= RECHECK + 5
    # and signing in again meets the portal's refusal
    page = browser.get(proxy.url + "/lab", headers=HTML, timeout=30)
    assert page.status_code == 403 and "no role in the workload" in page.text


def test_each_refresh_asks_the_portal_and_signing_out_of_it_ends_the_workload_session(
        notebook, live_server):
    workload, proxy, _ = notebook
    browser, response = sign_in(proxy, "lead")
    assert response.status_code == 200
    signed_in = ProxySession.objects.get(workload=workload).checked_at
    time.sleep(REFRESH_DUE)
    assert browser.get(proxy.url + "/lab", headers=JSON, timeout=30).status_code == 200
    # that request's refresh asked the portal, which checked the user's access again
    assert ProxySession.objects.get(workload=workload).checked_at > signed_in
    logout = browser.get(f"{live_server.url}/", timeout=30)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', logout.text).group(1)
    browser.post(f"{live_server.url}/logout/", data={"csrfmiddlewaretoken": token},
                 headers={"Referer": f"{live_server.url}/"}, timeout=30)
    time.sleep(REFRESH_DUE)
    assert browser.get(proxy.url + "/lab", headers=JSON, timeout=30).status_code == 401
    # the portal's refusal ended the session at once: the proxy cleared its cookie
    assert session_cookie(browser, proxy) is None
    assert "Fatal refresh error detected" in proxy.log_text()
    ended = ProxySession.objects.get(workload=workload)
    assert ended.ended_at is not None
    assert ended.ended_reason == "the portal session it came from has ended"


def test_the_portal_unreachable_keeps_admitted_sessions_until_their_id_token_expires(notebook):
    _, proxy, relay = notebook
    browser, response = sign_in(proxy, "researcher")
    assert response.status_code == 200
    expires = time.monotonic() + ID_TOKEN_SECONDS
    relay.close()  # the portal is gone for the proxy
    time.sleep(REFRESH_DUE)
    assert browser.get(proxy.url + "/lab", headers=JSON, timeout=30).status_code == 200
    assert "Unable to refresh session" in proxy.log_text()  # it tried, and kept the session
    time.sleep(max(0.0, expires - time.monotonic()) + 1.1)
    assert browser.get(proxy.url + "/lab", headers=JSON, timeout=30).status_code == 401


def _consent(browser: requests.Session, issuer: str, params: dict, *, query: str = "",
             method: str = "POST") -> requests.Response:
    """The authorization endpoint asked by a signed-in browser in the shape an attacker picks:
    the proxy's own parameters posted as the consent form (or sent as a query), with `query`
    added to the address."""
    address = f"{issuer}/authorize/" + (f"?{query}" if query else "")
    if method == "GET":
        return browser.get(f"{address}{'&' if query else '?'}{urllib.parse.urlencode(params)}",
                           headers=HTML, allow_redirects=False, timeout=30)
    form = {**params, "allow": "Authorize",
            "csrfmiddlewaretoken": browser.cookies.get("csrftoken")}
    return browser.post(address, data=form, headers={**HTML, "Referer": address},
                        allow_redirects=False, timeout=30)


def _started_at_the_proxy(proxy, issuer: str, live_server, username: str):
    """A browser that opened the workload (the proxy's own authorization request: its state,
    PKCE challenge and CSRF cookie) and signed in at the portal as `username`; returns the
    browser and the proxy's parameters."""
    browser = requests.Session()
    to_portal = browser.get(proxy.url + "/lab", headers=HTML, allow_redirects=False, timeout=30)
    assert to_portal.status_code == 302
    params = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(
        to_portal.headers["Location"]).query))
    assert portal_login(browser, f"{live_server.url}/login/", username).status_code == 302
    return browser, params


def test_no_request_shape_lets_another_project_into_the_workload(notebook, launch_notebook,
                                                                 issuer, live_server):
    """Through the real oauth2-proxy: a member of another project posts the
    consent form with the workload's client in the body and another in the address (unknown, or
    a workload of their own), gives a parameter twice, or asks plainly. No shape gets a code,
    and the proxy's callback opens no session. The owner, posting the same form plainly, gets
    in: the shape itself works."""
    workload, proxy, _ = notebook
    browser, params = _started_at_the_proxy(proxy, issuer, live_server, "student")
    shapes = [
        dict(query="client_id=x"),
        dict(query="client_id="),
        dict(query=f"client_id={workload.access.client_id}"),
        dict(query="client_id=" + params["client_id"] + "&client_id=x", method="GET"),
        dict(query="client_id=x", method="GET"),
        dict(),
        dict(method="GET"),
    ]
    for shape in shapes:
        answer = _consent(browser, issuer, params, **shape)
        assert answer.status_code in (400, 403), (shape, answer.status_code, answer.text[:300])
        location = answer.headers.get("Location", "")
        assert "code=" not in location, shape
    # and the callback, had a code come back, opens nothing
    assert requests.get(proxy.url + "/lab", headers=JSON, cookies=browser.cookies,
                        timeout=30).status_code == 401
    assert not ProxySession.objects.filter(workload=workload).exists()
    # the owner posting the very same form gets in through the real proxy
    owner, owner_params = _started_at_the_proxy(proxy, issuer, live_server, "researcher")
    answer = _consent(owner, issuer, owner_params)
    assert answer.status_code == 302 and "code=" in answer.headers["Location"], answer.text[:300]
    landed = owner.get(answer.headers["Location"], headers=HTML, timeout=30)
    assert (landed.status_code, landed.text) == (200, "hello from the application")
