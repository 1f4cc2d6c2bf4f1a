"""A private container registry on loopback: CNCF Distribution's `registry` (Apache-2.0), built
from the Go module proxy by stack/k8s/build.py (its wrapper module is stack/distribution), for
the tests of `registry` secrets (tests/support/registry.py) as a site's registry would answer
them.

Two ways to log in, the two a kubelet meets:

- `htpasswd`: the registry answers `/v2/` with a Basic challenge and checks each request's
  user and password against an htpasswd file of bcrypt entries written here. Every account
  reads every repository.
- `token`: the registry answers with a Bearer challenge naming a token service; the client
  trades its user and password there for a short-lived token (a JWT naming the repositories
  and actions it grants) and sends that. The token service is a small one of ours
  (TokenService, in this process): it checks the password and grants each account pull and
  push on the repository prefixes it is given, nothing else, as a site's registry with
  per-project access would. The registry verifies each token's signature against the service's
  public key (a JWKS file) itself.

Plain HTTP on 127.0.0.1, as container runtimes use for a loopback registry (Docker's default
insecure range is 127.0.0.0/8; containerd's CRI treats localhost the same).

    python -m stack.registry /tmp/registry      # runs until Ctrl-C, prints where and who
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import hmac
import json
import secrets
import subprocess
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from .procs import StackError, free_port, serve_until_signalled, spawn_ready, stop

SERVICE = "portal-registry"
ISSUER = "portal-registry-tokens"
TOKEN_SECONDS = 300
PULL, PUSH = "pull", "push"


def b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def htpasswd_line(user: str, password: str) -> str:
    """An htpasswd entry as the registry reads it: bcrypt (the only scheme it takes)."""
    import bcrypt

    return f"{user}:{bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=5)).decode()}"


class TokenService:
    """The token service of a `token` registry: GET /token?service=&scope=repository:NAME:ACTIONS
    with Basic credentials → {"token", "access_token", "expires_in", "issued_at"}. A wrong
    password is 401; no credentials get a token granting nothing (as public registries do);
    a known account gets the actions asked for on the repositories under its prefixes."""

    def __init__(self, users: dict[str, str], grants: dict[str, dict[str, tuple[str, ...]]],
                 *, port: int = 0) -> None:
        from cryptography.hazmat.primitives.asymmetric import ec

        self.users = users
        self.grants = grants  # user → {repository prefix: actions}
        self.port = port or free_port()
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.kid = uuid.uuid4().hex
        self.httpd: ThreadingHTTPServer | None = None
        self.requests = 0  # tokens asked for, refused ones included

    @property
    def realm(self) -> str:
        return f"http://127.0.0.1:{self.port}/token"

    def jwks(self) -> dict[str, Any]:
        numbers = self.key.public_key().public_numbers()
        return {"keys": [{"kty": "EC", "crv": "P-256", "kid": self.kid, "use": "sig",
                          "alg": "ES256", "x": b64url(numbers.x.to_bytes(32, "big")),
                          "y": b64url(numbers.y.to_bytes(32, "big"))}]}

    def token(self, subject: str, access: list[dict[str, Any]]) -> str:
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec, utils

        now = int(time.time())
        header = {"alg": "ES256", "typ": "JWT", "kid": self.kid}
        claims = {"iss": ISSUER, "sub": subject, "aud": SERVICE, "iat": now, "nbf": now - 1,
                  "exp": now + TOKEN_SECONDS, "jti": uuid.uuid4().hex, "access": access}
        signing_input = ".".join(b64url(json.dumps(part, separators=(",", ":")).encode())
                                 for part in (header, claims))
        r, s = utils.decode_dss_signature(
            self.key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256())))
        return f"{signing_input}.{b64url(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))}"

    def login(self, authorization: str) -> str | None:
        """The account the Basic credentials name, "" for none given, None for wrong ones."""
        if not authorization:
            return ""
        scheme, _, encoded = authorization.partition(" ")
        try:
            user, _, password = base64.b64decode(encoded).decode().partition(":")
        except ValueError:
            return None
        known = self.users.get(user)
        if scheme.lower() != "basic" or known is None or \
                not hmac.compare_digest(known.encode(), password.encode()):
            return None
        return user

    def granted(self, user: str, scopes: list[str]) -> list[dict[str, Any]]:
        access = []
        for scope in scopes:
            kind, _, rest = scope.partition(":")
            name, _, actions = rest.rpartition(":")
            if kind != "repository" or not name:
                continue
            allowed = {action for prefix, given in self.grants.get(user, {}).items()
                       if name == prefix or name.startswith(f"{prefix}/") for action in given}
            wanted = sorted(set(actions.split(",")) & allowed)
            if wanted:
                access.append({"type": "repository", "name": name, "actions": wanted})
        return access

    def start(self) -> TokenService:
        service = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                service.requests += 1
                url = urlsplit(self.path)
                query = parse_qs(url.query)
                user = service.login(self.headers.get("Authorization", ""))
                if url.path != "/token" or query.get("service") != [SERVICE]:
                    self._answer(400, {"errors": [{"code": "INVALID_REQUEST",
                                                   "message": "unknown service"}]})
                elif user is None:
                    self._answer(401, {"errors": [{"code": "UNAUTHORIZED",
                                                   "message": "incorrect username or password"}]})
                else:
                    token = service.token(user, service.granted(user, query.get("scope", [])))
                    self._answer(200, {"token": token, "access_token": token,
                                       "expires_in": TOKEN_SECONDS,
                                       "issued_at": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                  time.gmtime())})

            def _answer(self, status: int, body: dict[str, Any]) -> None:
                raw = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                return  # no request lines on the tests' output (they name accounts)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.httpd.serve_forever, name="registry-tokens",
                         daemon=True).start()
        return self

    def stop(self) -> None:
        if self.httpd is not None:
            self.httpd.shutdown()
            self.httpd.server_close()
            self.httpd = None


@dataclasses.dataclass
class RegistryServer:
    """One registry in `workdir` (data/, config.yml, registry.log) on a free loopback port.
    `users`: account → password; `grants` (token mode): account → {repository prefix:
    actions}; in htpasswd mode every account may pull and push everything."""

    workdir: Path
    auth: str = "htpasswd"
    users: dict[str, str] = dataclasses.field(default_factory=dict)
    grants: dict[str, dict[str, tuple[str, ...]]] = dataclasses.field(default_factory=dict)
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None
    tokens: TokenService | None = None

    def __post_init__(self) -> None:
        if self.auth not in ("htpasswd", "token"):
            raise ValueError(f"auth is htpasswd or token, not {self.auth!r}")
        self.workdir = Path(self.workdir)
        self.port = self.port or free_port()

    @property
    def host(self) -> str:
        """As an image reference names it: 127.0.0.1:PORT."""
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.host}"

    def _write_htpasswd(self) -> Path:
        path = self.workdir / "htpasswd"
        staged = path.with_suffix(".new")
        staged.write_text("".join(f"{htpasswd_line(u, p)}\n" for u, p in self.users.items()))
        staged.chmod(0o600)
        staged.replace(path)  # whole or not at all: the registry may read it at any time
        return path

    def set_password(self, user: str, password: str,
                     grants: dict[str, tuple[str, ...]] | None = None) -> None:
        """Add an account or change its password (and its grants), as a site's registry admin
        would: the token service reads them on its next request, the registry its htpasswd
        file (it reloads the file when its modification time changes)."""
        self.users[user] = password
        if grants is not None:
            self.grants[user] = grants
        if self.auth == "htpasswd" and self.proc is not None:
            self._write_htpasswd()

    def config(self) -> dict[str, Any]:
        auth: dict[str, Any]
        if self.auth == "htpasswd":
            auth = {"htpasswd": {"realm": SERVICE, "path": str(self._write_htpasswd())}}
        else:
            assert self.tokens is not None
            jwks = self.workdir / "jwks.json"
            jwks.write_text(json.dumps(self.tokens.jwks()))
            auth = {"token": {"realm": self.tokens.realm, "service": SERVICE, "issuer": ISSUER,
                              "jwks": str(jwks), "signingalgorithms": ["ES256"]}}
        return {
            "version": 0.1,
            "log": {"level": "info", "accesslog": {"disabled": True}},
            "storage": {"filesystem": {"rootdirectory": str(self.workdir / "data")},
                        "delete": {"enabled": True}},
            "http": {"addr": self.host, "secret": secrets.token_hex(16)},
            "auth": auth,
        }

    def ready(self) -> bool:
        """`/v2/` answers as a registry does: 401 with its API version header."""
        import httpx

        try:
            answer = httpx.get(f"{self.url}/v2/", timeout=1)
        except httpx.HTTPError:
            return False
        return bool(answer.headers.get("Docker-Distribution-Api-Version") == "registry/2.0")

    def start(self) -> RegistryServer:
        from .k8s import build

        binary = build.ensure("distribution")["registry"]
        (self.workdir / "data").mkdir(parents=True, exist_ok=True)
        if self.auth == "token":
            self.tokens = TokenService(self.users, self.grants).start()
        config_path = self.workdir / "config.yml"
        config_path.write_text(json.dumps(self.config(), indent=1))  # YAML reads JSON
        log_path = self.workdir / "registry.log"
        try:
            self.proc = spawn_ready([str(binary), "serve", str(config_path)], log_path,
                                    env={"PATH": "/usr/bin:/bin"}, ready=self.ready,
                                    what="the registry (distribution)")
        except StackError:
            self.stop()  # the token service
            raise
        return self

    def stop(self) -> None:
        stop(self.proc)
        self.proc = None
        if self.tokens is not None:
            self.tokens.stop()
            self.tokens = None


def digest_of(raw: bytes) -> str:
    return f"sha256:{hashlib.sha256(raw).hexdigest()}"


def main(argv: list[str]) -> int:
    if len(argv) not in (1, 2) or (len(argv) == 2 and argv[1] not in ("htpasswd", "token")):
        print("usage: python -m stack.registry FOLDER [htpasswd|token]", file=sys.stderr)
        return 2
    password = secrets.token_urlsafe(18)
    mode = argv[1] if len(argv) == 2 else "htpasswd"
    server = RegistryServer(Path(argv[0]), auth=mode, users={"portal": password},
                            grants={"portal": {"team": (PULL, PUSH)}})
    return serve_until_signalled(
        "registry", server.start,
        lambda started: f"registry at {started.url} ({mode}); account portal, password "
                        f"{password}" + ("; repositories under team/" if mode == "token" else ""),
        RegistryServer.stop)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
