"""What the proxy tests share (tests/access/conftest.py holds their fixtures): the application
behind a proxy, a relay that can cut the portal off from the proxy, a browser signing in at the
portal, and tokens minted with the portal's own signing key."""

from __future__ import annotations

import json
import re
import socket
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import requests
from django.conf import settings
from jwcrypto import jwk, jwt

from access.proxy import cookie_name
from stack.authproxy import AuthProxy

HTML = {"Accept": "text/html,application/xhtml+xml"}
JSON = {"Accept": "application/json"}
# what oauth2-proxy's legacy options would add; the alpha configuration adds none of them
PROXY_HEADERS = ("X-Forwarded-User", "X-Forwarded-Email", "X-Forwarded-Preferred-Username",
                 "X-Forwarded-Access-Token", "X-Forwarded-Groups", "X-Auth-Request-User",
                 "X-Auth-Request-Access-Token", "Gap-Auth")
RECHECK = 2  # seconds between the proxy's refreshes in the live-portal tests (60 on a real site)
# how long after its last refresh a session is sure to be refreshed by its next request: the
# proxy takes its age from the time truncated to the second (SessionState.Age), up to 1 s less
REFRESH_DUE = RECHECK + 1.1
ID_TOKEN_SECONDS = 6  # the ID token's lifetime there: how long a cut-off proxy keeps a session


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

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Relay:
    """A TCP relay to the portal for the proxy's own calls (token, keys): closing it is the
    portal becoming unreachable for the proxy while browsers still reach it. It keeps what the
    portal answered the proxy (`from_portal`: the tokens it handed out, among others)."""

    def __init__(self, target_port: int) -> None:
        self.target = target_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.open = True
        self.sockets: list[socket.socket] = []
        self.from_portal = bytearray()
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
            for a, b, seen in ((client, upstream, None), (upstream, client, self.from_portal)):
                threading.Thread(target=self._pipe, args=(a, b, seen), daemon=True).start()

    @staticmethod
    def _pipe(a: socket.socket, b: socket.socket, seen: bytearray | None) -> None:
        try:
            while data := a.recv(65536):
                if seen is not None:
                    seen += data
                b.sendall(data)
        except OSError:
            pass
        finally:
            for s in (a, b):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def tokens(self) -> dict[str, list[str]]:
        """The tokens in the portal's answers to the proxy, by kind (access_token, …)."""
        found: dict[str, list[str]] = {}
        text = self.from_portal.decode(errors="replace")
        for kind, value in re.findall(r'"(access_token|refresh_token|id_token)"\s*:\s*"([^"]+)"',
                                      text):
            found.setdefault(kind, []).append(value)
        return found

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


# --- a browser at the portal --------------------------------------------------------------

def portal_login(browser: requests.Session, login_url: str, username: str) -> requests.Response:
    """The portal's login form, as a browser fills it; returns the response to the POST."""
    page = browser.get(login_url, timeout=30)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    return browser.post(login_url, data={
        "csrfmiddlewaretoken": token, "username": username, "domain": "Default",
        "password": f"{username}-demo-pass"}, headers={"Referer": login_url},
        allow_redirects=False, timeout=30)


def authorize(proxy: AuthProxy, username: str,
              path: str = "/lab") -> tuple[requests.Session, requests.Response]:
    """Open the workload in a fresh browser and sign in at the portal, up to the authorization
    endpoint's answer: a redirect to the proxy's callback with the code, or the portal's
    refusal. Returns the browser and that answer."""
    browser = requests.Session()
    to_portal = browser.get(proxy.url + path, headers=HTML, allow_redirects=False, timeout=30)
    assert to_portal.status_code == 302
    to_login = browser.get(to_portal.headers["Location"], allow_redirects=False, timeout=30)
    assert to_login.status_code == 302 and "/login/?next=/o/authorize/" in to_login.headers[
        "Location"]
    login_url = requests.compat.urljoin(to_portal.headers["Location"], to_login.headers["Location"])
    response = portal_login(browser, login_url, username)
    assert response.status_code == 302, response.text[:2000]
    answer = browser.get(requests.compat.urljoin(login_url, response.headers["Location"]),
                         headers=HTML, allow_redirects=False, timeout=30)
    if answer.status_code == 302:
        assert answer.headers["Location"].startswith(proxy.url + "/oauth2/callback?")
    return browser, answer


def sign_in(proxy: AuthProxy, username: str) -> tuple[requests.Session, requests.Response]:
    """Open the workload in a fresh browser and sign in at the portal: returns the browser
    and the last response (the application's page, or the portal's refusal)."""
    browser, answer = authorize(proxy, username)
    if answer.status_code != 302:
        return browser, answer
    return browser, browser.get(answer.headers["Location"], headers=HTML, timeout=30)


def code_of(answer: requests.Response) -> str:
    """The authorization code in the authorization endpoint's redirect to the callback."""
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(answer.headers["Location"]).query)
    return query["code"][0]


def session_cookie(browser: requests.Session, proxy: AuthProxy):
    """The proxy's session cookie in the browser, or None."""
    return next((c for c in browser.cookies if c.name == cookie_name(proxy.spec)), None)


# --- tokens signed with the portal's key ----------------------------------------------------

def portal_key() -> jwk.JWK:
    return jwk.JWK.from_pem(settings.PORTAL_OIDC_PRIVATE_KEY.encode())


def claims_of(token: str) -> dict:
    """A token's claims, its signature checked with the portal's key."""
    return json.loads(jwt.JWT(jwt=token, key=portal_key(), check_claims=False).claims)


def mint(claims: dict, key: jwk.JWK | None = None) -> str:
    """A JWT as services.workload_token_issue signs it (RS256, kid the key's thumbprint), with
    `claims`; `key` another key that claims the portal's kid."""
    kid = portal_key().thumbprint()
    token = jwt.JWT(header={"alg": "RS256", "kid": kid, "typ": "JWT"}, claims=claims)
    token.make_signed_token(key or portal_key())
    return token.serialize()
