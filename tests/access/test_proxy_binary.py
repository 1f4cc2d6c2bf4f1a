"""The real oauth2-proxy (stack/k8s/build.py builds it) with access/proxy.py's
configuration, run by stack/authproxy.py in front of a small HTTP application, where no OpenID
Connect provider is needed: public mode, what reaches the application, what is refused before
any provider is asked, TLS. Nothing listens at the issuer here. Whatever needs the portal's
answers (a login, a bearer token's signature, a cookie from a login, a refresh, the portal
down) runs against the live portal in tests/access/test_proxy_portal.py."""

from __future__ import annotations

import datetime
import urllib.parse

import pytest
import requests
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from access.proxy import CLIENT_SECRET_KEY, COOKIE_SECRET_KEY, ProxySpec
from stack.authproxy import AuthProxy
from stack.k8s import build
from tests.access.proxies import HTML, JSON, PROXY_HEADERS

CLIENT_ID = "wl-client-1"
ISSUER = "http://127.0.0.1:9/o"  # nothing listens there
# characters that would break the file if the secret were not kept a literal string (that the
# portal gets it intact: test_proxy_portal.py)
CLIENT_SECRET = 'se"cr: #et $1 \\x'
COOKIE_SECRET = "0123456789abcdef0123456789abcdef"
JUPYTER_TOKEN = "jupyter-token-6f1c"


@pytest.fixture(scope="module")
def binary():
    return build.ensure("oauth2-proxy", quiet=True)["oauth2-proxy"]


@pytest.fixture
def run_proxy(binary, application, tmp_path):
    """Start a proxy for the application with the given ProxySpec fields."""
    started: list[AuthProxy] = []

    def start(*, secrets: dict | None = None, **fields) -> AuthProxy:
        secrets = {CLIENT_SECRET_KEY: CLIENT_SECRET, COOKIE_SECRET_KEY: COOKIE_SECRET,
                   "JUPYTER_TOKEN": JUPYTER_TOKEN, **(secrets or {})}
        spec = ProxySpec(image="unused", issuer_url=ISSUER, backend_url=ISSUER,
                         client_id=CLIENT_ID, secret_name="unused",
                         upstream_port=application.port, **fields)
        proxy = AuthProxy(spec, secrets=secrets, workdir=tmp_path / f"proxy-{len(started)}",
                          binary=binary)
        started.append(proxy.start())
        return proxy

    yield start
    for proxy in started:
        proxy.stop()


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
    assert f"{target.scheme}://{target.netloc}{target.path}" == f"{ISSUER}/authorize/"
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
def test_with_a_tls_secret_it_serves_https_and_its_cookies_are_secure(run_proxy):
    tls = _self_signed()
    proxy = run_proxy(tls_secret="workloads-tls", secrets=tls)
    assert proxy.url.startswith("https://")
    answer = requests.get(proxy.url + "/", headers=HTML, allow_redirects=False, verify=False)
    assert answer.status_code == 302
    query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(answer.headers["Location"]).query))
    assert query["redirect_uri"] == proxy.url + "/oauth2/callback"
    assert "; Secure" in answer.headers["Set-Cookie"]
    # HTTPS only: plain HTTP on the port is turned away
    plain = requests.get(proxy.url.replace("https://", "http://") + "/", timeout=5)
    assert plain.status_code == 400
