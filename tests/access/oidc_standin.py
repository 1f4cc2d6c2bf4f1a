"""A stand-in for the portal's OpenID Connect endpoints, as oauth2-proxy uses them.

It answers what the proxy asks of the portal, and no more: the authorization endpoint (which
admits at once, as for a signed-in user), the token endpoint (code with PKCE, refresh) and the
key set. It lets the proxy tests see the real binary's side of a login, a refresh and an outage
without the portal's database and Keystone; portal/access's own tests cover the portal's side.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from jwcrypto import jwk, jwt

from stack.procs import free_port

USER_CLAIMS = {"sub": "user-1", "preferred_username": "alice", "email": "alice@default.invalid",
               "email_verified": True, "name": "Alice"}


class OidcStandIn:
    def __init__(self, *, client_id: str, client_secret: str, id_token_seconds: int = 300,
                 access_token_seconds: int = 300) -> None:
        self.client_id = client_id
        self.client_secret = client_secret
        self.id_token_seconds = id_token_seconds
        self.access_token_seconds = access_token_seconds
        # what the token endpoint answers a refresh: "tokens", "tokens-without-id-token",
        # "invalid_grant"
        self.refresh_answer = "tokens"
        self.key = jwk.JWK.generate(kty="RSA", size=2048, kid="standin-1")
        self.port = free_port()
        self.calls: list[tuple[str, str]] = []  # (path, grant type or "")
        self.issued: list[str] = []  # every code and token handed out
        self._codes: dict[str, dict[str, str]] = {}
        self._refresh_tokens: set[str] = set()
        self._server: ThreadingHTTPServer | None = None

    @property
    def issuer(self) -> str:
        return f"http://127.0.0.1:{self.port}/o"

    def start(self) -> OidcStandIn:
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                standin._get(self)

            def do_POST(self) -> None:
                standin._post(self)

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def sign(self, claims: dict, key: jwk.JWK | None = None) -> str:
        key = key or self.key
        token = jwt.JWT(header={"alg": "RS256", "kid": key.get("kid"), "typ": "JWT"}, claims=claims)
        token.make_signed_token(key)
        return token.serialize()

    def bearer_token(self, *, seconds: int = 60, **overrides) -> str:
        """A token as the portal gives a script: audience the workload's client, short-lived."""
        now = int(time.time())
        claims = {"iss": self.issuer, "sub": "user-1", "aud": self.client_id, "iat": now,
                  "exp": now + seconds, **overrides}
        return self.sign({k: v for k, v in claims.items() if v is not None})

    # --- the endpoints ---

    def _get(self, req: BaseHTTPRequestHandler) -> None:
        url = urllib.parse.urlsplit(req.path)
        self.calls.append((url.path, ""))
        if url.path == "/o/.well-known/jwks.json":
            public = {**self.key.export_public(as_dict=True), "alg": "RS256", "use": "sig"}
            return _json(req, 200, {"keys": [public]})
        if url.path == "/o/authorize/":
            query = dict(urllib.parse.parse_qsl(url.query))
            if query.get("client_id") != self.client_id or "code_challenge" not in query:
                return _json(req, 400, {"error": "invalid_request"})
            code = secrets.token_urlsafe(16)
            self.issued.append(code)
            self._codes[code] = query
            target = query["redirect_uri"] + "?" + urllib.parse.urlencode(
                {"code": code, "state": query["state"]})
            req.send_response(302)
            req.send_header("Location", target)
            req.send_header("Content-Length", "0")
            req.end_headers()
            return None
        return _json(req, 404, {"error": "not_found"})

    def _post(self, req: BaseHTTPRequestHandler) -> None:
        length = int(req.headers.get("Content-Length") or 0)
        form = dict(urllib.parse.parse_qsl(req.rfile.read(length).decode()))
        grant = form.get("grant_type", "")
        self.calls.append((urllib.parse.urlsplit(req.path).path, grant))
        client_id, client_secret = form.get("client_id"), form.get("client_secret")
        basic = req.headers.get("Authorization", "")
        if basic.startswith("Basic "):
            user, _, password = base64.b64decode(basic[6:]).decode().partition(":")
            # golang.org/x/oauth2 form-encodes both before Basic (RFC 6749 2.3.1)
            client_id = urllib.parse.unquote_plus(user)
            client_secret = urllib.parse.unquote_plus(password)
        if (client_id, client_secret) != (self.client_id, self.client_secret):
            return _json(req, 401, {"error": "invalid_client"})
        if grant == "authorization_code":
            asked = self._codes.pop(form.get("code", ""), None)
            verifier = form.get("code_verifier", "")
            challenge = base64.urlsafe_b64encode(
                hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
            if asked is None or asked["code_challenge"] != challenge \
                    or asked["redirect_uri"] != form.get("redirect_uri"):
                return _json(req, 400, {"error": "invalid_grant"})
            return _json(req, 200, self._tokens(id_token=True))
        if grant == "refresh_token":
            if self.refresh_answer == "invalid_grant" \
                    or form.get("refresh_token") not in self._refresh_tokens:
                return _json(req, 400, {"error": "invalid_grant"})
            self._refresh_tokens.discard(form["refresh_token"])  # rotated
            return _json(req, 200, self._tokens(id_token=self.refresh_answer == "tokens"))
        return _json(req, 400, {"error": "unsupported_grant_type"})

    def _tokens(self, *, id_token: bool) -> dict:
        now = int(time.time())
        access, refresh = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
        self._refresh_tokens.add(refresh)
        answer = {"access_token": access, "token_type": "Bearer", "refresh_token": refresh,
                  "expires_in": self.access_token_seconds, "scope": "openid email profile"}
        if id_token:
            answer["id_token"] = self.sign({"iss": self.issuer, "aud": self.client_id,
                                            "iat": now, "exp": now + self.id_token_seconds,
                                            **USER_CLAIMS})
        self.issued += [answer[k] for k in ("access_token", "refresh_token", "id_token")
                        if k in answer]
        return answer


def _json(req: BaseHTTPRequestHandler, status: int, body: dict) -> None:
    data = json.dumps(body).encode()
    req.send_response(status)
    req.send_header("Content-Type", "application/json")
    req.send_header("Content-Length", str(len(data)))
    req.end_headers()
    req.wfile.write(data)
