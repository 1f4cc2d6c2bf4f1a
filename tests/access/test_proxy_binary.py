"""The real oauth2-proxy (stack/k8s/build.py builds it) with portal/access/proxy.py's
configuration, run by stack/authproxy.py in front of a small HTTP application: what passes, what
is refused and with which status, what reaches the application, what the logs keep. The portal's
side is tests/access/oidc_standin.py (its endpoints as the proxy uses them)."""

from __future__ import annotations

import datetime
import threading
import time
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from jwcrypto import jwk

from portal.access.proxy import CLIENT_SECRET_KEY, COOKIE_SECRET_KEY, ProxySpec
from stack.authproxy import AuthProxy
from stack.k8s import build

from .oidc_standin import OidcStandIn

CLIENT_ID = "wl-client-1"
# characters that would break the file if the secret were not kept a literal string
CLIENT_SECRET = 'se"cr: #et $1 \\x'
COOKIE_SECRET = "0123456789abcdef0123456789abcdef"
JUPYTER_TOKEN = "jupyter-token-6f1c"
HTML = {"Accept": "text/html,application/xhtml+xml"}
JSON = {"Accept": "application/json"}
# what oauth2-proxy's legacy options would add; the alpha configuration adds none of them
PROXY_HEADERS = ("X-Forwarded-User", "X-Forwarded-Email", "X-Forwarded-Preferred-Username",
                 "X-Forwarded-Access-Token", "X-Forwarded-Groups", "X-Auth-Request-User",
                 "X-Auth-Request-Access-Token", "Gap-Auth")


class Application:
    """The workload's application: answers 200 and records what reached it."""

    def __init__(self) -> None:
        self.requests: list[dict] = []
        app = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                app.requests.append({"path": self.path,
                                     "headers": {k: self.headers.get_all(k)
                                                 for k in self.headers.keys()}})
                body = b"hello from the application"
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def last(self) -> dict:
        return self.requests[-1]


@pytest.fixture(scope="module")
def binary():
    return build.ensure("oauth2-proxy", quiet=True)["oauth2-proxy"]


@pytest.fixture(scope="module")
def application() -> Iterator[Application]:
    app = Application()
    yield app
    app.server.shutdown()
    app.server.server_close()


@pytest.fixture
def portal() -> Iterator[OidcStandIn]:
    standin = OidcStandIn(client_id=CLIENT_ID, client_secret=CLIENT_SECRET).start()
    yield standin
    standin.stop()


@pytest.fixture
def run_proxy(binary, application, tmp_path):
    """Start a proxy for the application with the given ProxySpec fields."""
    started: list[AuthProxy] = []

    def start(portal: OidcStandIn | None = None, *, secrets: dict | None = None,
              **fields) -> AuthProxy:
        issuer = portal.issuer if portal else "http://127.0.0.1:9/o"  # nothing listens there
        secrets = {CLIENT_SECRET_KEY: CLIENT_SECRET, COOKIE_SECRET_KEY: COOKIE_SECRET,
                   "JUPYTER_TOKEN": JUPYTER_TOKEN, **(secrets or {})}
        spec = ProxySpec(image="unused", issuer_url=issuer, backend_url=issuer,
                         client_id=CLIENT_ID, secret_name="unused",
                         upstream_port=application.port, **fields)
        proxy = AuthProxy(spec, secrets=secrets, workdir=tmp_path / f"proxy-{len(started)}",
                          binary=binary)
        started.append(proxy.start())
        return proxy

    yield start
    for proxy in started:
        proxy.stop()


def login(proxy: AuthProxy, browser: requests.Session, path: str = "/notebooks") -> None:
    """A browser's login: the proxy sends it to the portal, the portal back with a code."""
    first = browser.get(proxy.url + path, headers=HTML, allow_redirects=False)
    assert first.status_code == 302
    to_portal = browser.get(first.headers["Location"], allow_redirects=False)
    assert to_portal.status_code == 302
    callback = browser.get(to_portal.headers["Location"], allow_redirects=False)
    assert callback.status_code == 302, callback.text
    assert callback.headers["Location"] == path


def session_cookie(browser: requests.Session) -> str:
    return next(c.value for c in browser.cookies if c.name.startswith(f"_auth_proxy_{CLIENT_ID}"))


# --- public: no login, still proxied ---

def test_public_passes_every_request_and_sends_the_application_its_token(run_proxy, application):
    proxy = run_proxy(public=True, upstream_token_env="JUPYTER_TOKEN")
    answer = requests.get(proxy.url + "/lab/tree?x=1",
                          headers={**HTML, "Authorization": "Bearer x.y.z"}, allow_redirects=False)
    assert (answer.status_code, answer.text) == (200, "hello from the application")
    seen = application.last()
    assert seen["path"] == "/lab/tree?x=1"
    # the client's Authorization is replaced, not added to
    assert seen["headers"]["Authorization"] == [f"token {JUPYTER_TOKEN}"]
    assert not set(seen["headers"]) & set(PROXY_HEADERS)


def test_public_without_an_application_token_removes_the_clients_authorization(
        run_proxy, application):
    proxy = run_proxy(public=True)
    assert requests.get(proxy.url + "/", headers={"Authorization": "Bearer x.y.z"}).ok
    assert "Authorization" not in application.last()["headers"]


# --- protected: the portal's login or a bearer token ---

def test_a_browser_without_session_is_sent_to_the_portals_login(run_proxy, application):
    proxy = run_proxy()  # the portal is down: the proxy starts all the same
    count = len(application.requests)
    answer = requests.get(proxy.url + "/lab?reset", headers=HTML, allow_redirects=False)
    assert answer.status_code == 302
    target = urllib.parse.urlsplit(answer.headers["Location"])
    assert f"{target.scheme}://{target.netloc}{target.path}" == "http://127.0.0.1:9/o/authorize/"
    query = dict(urllib.parse.parse_qsl(target.query))
    assert query["client_id"] == CLIENT_ID
    assert query["response_type"] == "code"
    assert query["redirect_uri"] == proxy.url + "/oauth2/callback"
    assert query["scope"] == "openid email profile"
    assert query["code_challenge_method"] == "S256" and query["code_challenge"]
    assert query["state"]
    # a script that asks for JSON gets 401, no redirect
    assert requests.get(proxy.url + "/api/status", headers=JSON).status_code == 401
    assert len(application.requests) == count


def test_a_garbage_bearer_token_is_refused(run_proxy, application):
    proxy = run_proxy()
    count = len(application.requests)
    garbage = {"Authorization": "Bearer x.y.z"}
    assert requests.get(proxy.url + "/", headers={**garbage, **JSON}).status_code == 401
    answer = requests.get(proxy.url + "/", headers={**garbage, **HTML}, allow_redirects=False)
    assert answer.status_code == 302 and "/o/authorize/" in answer.headers["Location"]
    assert len(application.requests) == count


def test_bearer_tokens_of_the_portal_for_this_workload(run_proxy, application, portal):
    proxy = run_proxy(portal, upstream_token_env="JUPYTER_TOKEN")
    count = len(application.requests)

    def status(token: str) -> int:
        headers = {"Authorization": f"Bearer {token}", **JSON}
        return requests.get(proxy.url + "/api/kernels", headers=headers).status_code

    # no e-mail, no name: issuer, audience, expiry and the signature are what it checks
    assert status(portal.bearer_token()) == 200
    seen = application.last()["headers"]
    assert seen["Authorization"] == [f"token {JUPYTER_TOKEN}"]  # never the bearer token
    assert status(portal.bearer_token(seconds=-60)) == 401  # expired
    assert status(portal.bearer_token(exp=None)) == 401  # no expiry at all
    assert status(portal.bearer_token(aud="another-workload")) == 401
    assert status(portal.bearer_token(iss="http://elsewhere/o")) == 401
    other_key = jwk.JWK.generate(kty="RSA", size=2048, kid=portal.key.get("kid"))
    forged = portal.sign({"iss": portal.issuer, "aud": CLIENT_ID, "sub": "u",
                          "exp": int(time.time()) + 60}, key=other_key)
    assert status(forged) == 401
    assert len(application.requests) == count + 1


def test_login_through_the_portal_reaches_the_application(run_proxy, application, portal):
    proxy = run_proxy(portal, upstream_token_env="JUPYTER_TOKEN")
    browser = requests.Session()
    login(proxy, browser)
    assert [c for c in portal.calls if c[0] == "/o/token/"] == [("/o/token/", "authorization_code")]
    # the cookie: its own name, not Secure over plain HTTP, HttpOnly, SameSite=Lax
    cookie = next(c for c in browser.cookies if c.name == f"_auth_proxy_{CLIENT_ID}")
    assert not cookie.secure and cookie.has_nonstandard_attr("HttpOnly")
    answer = browser.get(proxy.url + "/notebooks", headers={**HTML, "Authorization": "Bearer a"})
    assert (answer.status_code, answer.text) == (200, "hello from the application")
    seen = application.last()["headers"]
    assert seen["Authorization"] == [f"token {JUPYTER_TOKEN}"]
    assert not set(seen) & set(PROXY_HEADERS)
    # the browser's cookies go on to the application (Jupyter has its own); the proxy's is
    # encrypted with the cookie secret, which only the proxy holds
    assert f"_auth_proxy_{CLIENT_ID}=" in seen["Cookie"][0]
    # a signed-in browser whose page sends the application's own Authorization (JupyterLab
    # sends "token …") is not refused for it
    again = browser.get(proxy.url + "/api/contents", headers={**JSON, "Authorization": "token t"})
    assert again.status_code == 200
    # nothing secret in the proxy's log: not the code, the tokens, nor the secrets
    log = proxy.log_text()
    for secret in [*portal.issued, CLIENT_SECRET, COOKIE_SECRET, JUPYTER_TOKEN,
                   session_cookie(browser)]:
        assert secret not in log
    assert "/oauth2/callback" not in log and "code=" not in log


def test_a_forged_or_foreign_cookie_is_no_session(run_proxy, application, portal):
    proxy = run_proxy(portal)
    browser = requests.Session()
    login(proxy, browser)
    name = f"_auth_proxy_{CLIENT_ID}"
    value = session_cookie(browser)
    count = len(application.requests)
    forged = value[:-4] + ("AAAA" if not value.endswith("AAAA") else "BBBB")
    for cookie in (forged, "garbage"):
        answer = requests.get(proxy.url + "/", headers=JSON, cookies={name: cookie})
        assert answer.status_code == 401
        answer = requests.get(proxy.url + "/", headers=HTML, cookies={name: cookie},
                              allow_redirects=False)
        assert answer.status_code == 302
    # the same cookie sent to another workload's proxy (another cookie secret) is nothing there
    other = run_proxy(portal, secrets={COOKIE_SECRET_KEY: "fedcba9876543210fedcba9876543210"})
    assert requests.get(other.url + "/", headers=JSON, cookies={name: value}).status_code == 401
    assert len(application.requests) == count


def test_the_portal_down_when_the_browser_comes_back_with_its_code(run_proxy, portal):
    proxy = run_proxy(portal)
    browser = requests.Session()
    first = browser.get(proxy.url + "/", headers=HTML, allow_redirects=False)
    to_portal = browser.get(first.headers["Location"], allow_redirects=False)
    portal.stop()
    callback = browser.get(to_portal.headers["Location"], allow_redirects=False)
    assert callback.status_code == 500
    assert "Signing in to this workload could not be finished: the portal did not answer" \
        in callback.text
    assert "Request ID:" in callback.text
    assert not any(c.name == f"_auth_proxy_{CLIENT_ID}" for c in browser.cookies)


# --- refresh: the portal's re-check of access ---

def test_each_refresh_asks_the_portal_and_its_refusal_ends_the_session(run_proxy, portal):
    proxy = run_proxy(portal, cookie_refresh_seconds=1)
    browser = requests.Session()
    login(proxy, browser)
    time.sleep(2.1)
    assert browser.get(proxy.url + "/", headers=JSON).status_code == 200
    assert portal.calls[-1] == ("/o/token/", "refresh_token")
    # a refresh answered without a new ID token keeps the session too
    portal.refresh_answer = "tokens-without-id-token"
    time.sleep(2.1)
    assert browser.get(proxy.url + "/", headers=JSON).status_code == 200
    assert portal.calls[-1] == ("/o/token/", "refresh_token")
    # the portal refuses (the user lost access): the session ends at once
    portal.refresh_answer = "invalid_grant"
    time.sleep(2.1)
    assert browser.get(proxy.url + "/", headers=JSON).status_code == 401
    assert not any(c.name == f"_auth_proxy_{CLIENT_ID}" for c in browser.cookies)
    assert "Fatal refresh error detected" in proxy.log_text()


def test_the_portal_down_at_refresh_keeps_the_session_until_the_id_token_expires(
        run_proxy, portal):
    portal.id_token_seconds = 5
    proxy = run_proxy(portal, cookie_refresh_seconds=1)
    browser = requests.Session()
    login(proxy, browser)
    expires = time.time() + 5
    portal.stop()
    time.sleep(2.1)
    assert browser.get(proxy.url + "/", headers=JSON).status_code == 200  # refresh failed, kept
    assert "Unable to refresh session" in proxy.log_text()
    time.sleep(max(0.0, expires - time.time()) + 1.1)
    assert browser.get(proxy.url + "/", headers=JSON).status_code == 401


# --- TLS ---

def _self_signed() -> dict[str, str]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
            .sign(key, hashes.SHA256()))
    return {"tls.crt": cert.public_bytes(serialization.Encoding.PEM).decode(),
            "tls.key": key.private_bytes(serialization.Encoding.PEM,
                                         serialization.PrivateFormat.PKCS8,
                                         serialization.NoEncryption()).decode()}


@pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning")
def test_with_a_tls_secret_it_serves_https_and_its_cookies_are_secure(run_proxy, portal):
    tls = _self_signed()
    proxy = run_proxy(portal, tls_secret="workloads-tls", secrets=tls)
    assert proxy.url.startswith("https://")
    answer = requests.get(proxy.url + "/", headers=HTML, allow_redirects=False, verify=False)
    assert answer.status_code == 302
    query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(answer.headers["Location"]).query))
    assert query["redirect_uri"] == proxy.url + "/oauth2/callback"
    assert "; Secure" in answer.headers["Set-Cookie"]
    # HTTPS only: plain HTTP on the port is turned away
    plain = requests.get(proxy.url.replace("https://", "http://") + "/", timeout=5)
    assert plain.status_code == 400
