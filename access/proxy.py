"""The authenticating proxy in front of every service workload, as pure functions.

oauth2-proxy (built from the Go module proxy: stack/k8s/oauth2-proxy/) runs as a sidecar of the
workload's pod. The LoadBalancer Service and the tenant's NetworkPolicy reach only its port; the
application listens behind it. The portal is its OpenID Connect provider (workloads/oidc.py):
a browser is sent to the portal's login, a script brings a bearer token the portal issued for that
workload (a short-lived JWT whose audience is the workload's client id).

Everything here is spec in, data out (no client, no database, no settings): the pod's container
and the command line a test runs locally come from the same `ProxySpec`, so the test proves the
configuration the cluster gets.

How the pieces fit (oauth2-proxy v7.15.4):

- Its "alpha" configuration file (`proxy_files`, put in the workload's Secret and mounted with the
  page below) holds what only that file can say: the provider without OIDC discovery (the proxy
  starts while the portal is down), the upstream on the pod's loopback, the server (HTTP, or
  HTTPS with the TLS Secret) and the request headers. Its one header is `Authorization`: the
  client's own is always removed, and where the application has a token of its own (Jupyter's)
  the proxy sends `Authorization: token <value>` instead. Nothing else reaches the application:
  no access, ID or refresh token, no user headers.
- Command-line flags say the rest (cookie, session, logging); the two secrets come from the
  Secret through the environment, the client secret substituted into the file at start.
- The proxy runs in PROXY_DIR, the configuration Secret mounted at config/ and the TLS Secret at
  tls/; every path it is given is relative to it, so a local run in a folder laid out the same
  way (PROXY_FILE_PATHS) reads the same files with the same arguments.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import yaml

from tenants.manifests import PROXY_CPU_MILLIS, PROXY_MEMORY_MIB, restricted_container_security

from .ssh_server import SSH_PATH

Manifest = dict[str, Any]

PROXY_CONTAINER = "auth-proxy"
PROXY_PORT = 4180  # the pod's port named "http": what the Service targets
PORT_NAME = "http"
# keys of the workload's Secret that hold the proxy's credentials
CLIENT_SECRET_KEY = "auth-proxy-client-secret"
COOKIE_SECRET_KEY = "auth-proxy-cookie-secret"
# keys of the workload's Secret that hold the proxy's files (proxy_files), and where they lie in
# the proxy's working directory
CONFIG_KEY = "auth-proxy.yaml"
ERROR_PAGE_KEY = "auth-proxy-error.html"
PROXY_DIR = "/etc/auth-proxy"
CONFIG_DIR = "config"
TLS_DIR = "tls"
PROXY_FILE_PATHS = {CONFIG_KEY: f"{CONFIG_DIR}/config.yaml",
                    ERROR_PAGE_KEY: f"{CONFIG_DIR}/templates/error.html"}
TLS_FILES = ("tls.crt", "tls.key")  # the keys of a kubernetes.io/tls Secret
CONFIG_VOLUME = "auth-proxy-config"
TLS_VOLUME = "auth-proxy-tls"

# its own endpoints, under its prefix /oauth2/ so that they hide none of the application's paths
# (the defaults /ping and /ready are common application paths: TorchServe's /ping)
PING_PATH = "/oauth2/ping"
READY_PATH = "/oauth2/ready"

# the proxy's environment: the cookie secret is read as its flag, the client secret is
# substituted into the configuration file, the application's token is sent as a header
COOKIE_SECRET_ENV = "OAUTH2_PROXY_COOKIE_SECRET"
CLIENT_SECRET_ENV = "AUTH_PROXY_CLIENT_SECRET"
UPSTREAM_TOKEN_ENV = "AUTH_PROXY_UPSTREAM_TOKEN"
UPSTREAM_AUTHORIZATION_ENV = "AUTH_PROXY_UPSTREAM_AUTHORIZATION"

PROXY_RESOURCES = {"cpu": f"{PROXY_CPU_MILLIS}m", "memory": f"{PROXY_MEMORY_MIB}Mi"}
GO_MEMORY_LIMIT = "48MiB"  # the Go runtime collects harder before the container's limit
NONROOT_UID = 65532  # the distroless image's "nonroot" user

# how long the application may take to start answering a request
UPSTREAM_TIMEOUT = "300s"
# the request log without the request's URI: query strings carry tokens (the login's
# authorization code at /oauth2/callback, an application token a user put in a URL)
REQUEST_LOG_FORMAT = ("{{.Client}} - {{.RequestID}} - {{.Username}} [{{.Timestamp}}] {{.Host}} "
                      "{{.RequestMethod}} {{.Upstream}} {{.Protocol}} {{.UserAgent}} "
                      "{{.StatusCode}} {{.ResponseSize}} {{.RequestDuration}}")


@dataclasses.dataclass(frozen=True)
class ProxySpec:
    image: str                  # the oauth2-proxy image (settings.PORTAL_AUTH_PROXY_IMAGE)
    issuer_url: str             # the portal's OIDC issuer, as browsers reach it (…/o)
    backend_url: str            # the portal as the proxy reaches it (token, JWKS): …/o
    client_id: str              # the workload's OAuth client; the audience of its tokens
    secret_name: str            # the workload's Secret (CLIENT_SECRET_KEY, COOKIE_SECRET_KEY)
    upstream_port: int | None   # the application's port, on the pod's loopback (None: a
                                # batch job, reached only for SSH)
    listen_port: int = PROXY_PORT
    # the application's own token (Jupyter's), from this env var of the Secret, sent upstream as
    # "Authorization: token <value>" so that no URL has to carry it
    upstream_token_env: str | None = None
    public: bool = False        # an admin let the tenant open it to anyone: no login asked
    tls_secret: str | None = None  # a kubernetes.io/tls Secret: HTTPS on listen_port
    cookie_refresh_seconds: int = 60   # the portal re-checks access this often
    session_seconds: int = 8 * 3600    # the cookie's lifetime
    # where it listens: every address of the pod; a local run says 127.0.0.1
    listen_host: str = ""
    # where the login's answer comes back (…/oauth2/callback), when the address is known at
    # launch (behind the shared gateway); None: the request's own host and scheme
    redirect_url: str | None = None
    # the workload's SSH server on the pod's loopback (access/ssh_server.py): the proxy routes
    # SSH_PATH, a WebSocket, to it, behind the same login and the same bearer tokens
    ssh_port: int | None = None


def cookie_name(spec: ProxySpec) -> str:
    """One per client: two workloads behind one host name (cookies ignore ports) keep apart."""
    return "_auth_proxy_" + re.sub(r"[^A-Za-z0-9_-]", "_", spec.client_id)


def secure_cookies(spec: ProxySpec) -> bool:
    """HTTPS to the browser: the proxy's own certificate, or a gateway in front that serves
    the workload's address over HTTPS."""
    return bool(spec.tls_secret) or (spec.redirect_url or "").startswith("https://")


def proxy_args(spec: ProxySpec) -> list[str]:
    """The proxy's command-line flags, the same in the pod and in a local run."""
    args = [
        f"--alpha-config={PROXY_FILE_PATHS[CONFIG_KEY]}",
        f"--custom-templates-dir={CONFIG_DIR}/templates",
        # who may pass is the portal's decision (it refuses the login or the refresh), not an
        # e-mail domain's: portal users often have no address of their own
        "--email-domain=*",
        "--skip-provider-button=true",  # straight to the portal's login
        f"--cookie-name={cookie_name(spec)}",
        f"--cookie-secure={'true' if secure_cookies(spec) else 'false'}",
        "--cookie-samesite=lax",
        f"--cookie-expire={spec.session_seconds}s",
        # at each refresh the portal checks the user's access again; its refusal
        # ("invalid_grant") ends the proxy session
        f"--cookie-refresh={spec.cookie_refresh_seconds}s",
        f"--ping-path={PING_PATH}",
        f"--ready-path={READY_PATH}",
        "--silence-ping-logging=true",
        f"--request-logging-format={REQUEST_LOG_FORMAT}",
    ]
    if spec.redirect_url:
        args.append(f"--redirect-url={spec.redirect_url}")
    if spec.public:
        # no login for any path (still proxied), except SSH's: a public workload's shell is
        # not everyone's
        route = "^/" if spec.ssh_port is None else paths_outside(SSH_PATH)
        args.append(f"--skip-auth-route={route}")
    if not spec.public or spec.ssh_port is not None:
        # a script's bearer token (a JWT the portal signed, audience = this client) is a
        # session: gpuctl's for SSH too
        args.append("--skip-jwt-bearer-tokens=true")
    return args


def paths_outside(prefix: str) -> str:
    """A regular expression matching every path that does not start with `prefix` (an
    absolute path), written without look-ahead, which Go's RE2 has not: at each character of
    the prefix, the path may end or differ."""
    if not prefix.startswith("/") or len(prefix) < 2:
        raise ValueError("the prefix is an absolute path below /")
    pattern = ""
    for char in reversed(prefix[1:]):
        escaped = re.escape(char)
        different = f"[^{escaped}]"
        pattern = f"(?:$|{different}|{escaped}{pattern})" if pattern else f"(?:$|{different})"
    return f"^/{pattern}"


class _Literal(str):
    """A string the YAML below writes as a literal block: whatever the substituted secret
    holds (quotes, colons, a leading digit), it stays one string."""


class _ConfigDumper(yaml.SafeDumper):
    pass


_ConfigDumper.add_representer(
    _Literal, lambda dumper, data: dumper.represent_scalar("tag:yaml.org,2002:str", data,
                                                           style="|"))


def proxy_config(spec: ProxySpec) -> Manifest:
    """The alpha configuration, as data (proxy_files writes it as YAML)."""
    address = f"{spec.listen_host}:{spec.listen_port}"
    if spec.tls_secret:
        server: Manifest = {
            "secureBindAddress": address,
            "tls": {"cert": {"fromFile": f"{TLS_DIR}/tls.crt"},
                    "key": {"fromFile": f"{TLS_DIR}/tls.key"},
                    "minVersion": "TLS1.2"},
        }
    else:
        server = {"bindAddress": address}
    # listed with no value, a header is only removed from the client's request
    authorization: Manifest = {"name": "Authorization"}
    if spec.upstream_token_env:
        authorization["values"] = [{"secretSource": {"fromEnv": UPSTREAM_AUTHORIZATION_ENV}}]
    upstreams: list[Manifest] = []
    if spec.upstream_port is not None:
        upstreams.append({"id": "app", "path": "/",
                          "uri": f"http://127.0.0.1:{spec.upstream_port}/",
                          "timeout": UPSTREAM_TIMEOUT})
    if spec.ssh_port is not None:
        # the longer path wins over "/" whatever the order (oauth2-proxy sorts them)
        upstreams.append({"id": "ssh", "path": SSH_PATH,
                          "uri": f"http://127.0.0.1:{spec.ssh_port}/"})
    return {
        "server": server,
        "upstreamConfig": {"upstreams": upstreams},
        "injectRequestHeaders": [authorization],
        "providers": [{
            "id": "portal",
            "provider": "oidc",
            "name": "GPU portal",
            "clientID": spec.client_id,
            # substituted from the environment when the proxy reads the file
            "clientSecret": _Literal("${" + CLIENT_SECRET_ENV + "}"),
            # no discovery: the endpoints are known, so the proxy starts while the portal is
            # down; the browser goes to the issuer, the proxy itself to the backend address
            "loginURL": f"{spec.issuer_url}/authorize/",
            "redeemURL": f"{spec.backend_url}/token/",
            "scope": "openid email profile",
            "code_challenge_method": "S256",
            "oidcConfig": {
                "issuerURL": spec.issuer_url,
                "skipDiscovery": True,
                "jwksURL": f"{spec.backend_url}/.well-known/jwks.json",
                # the session's e-mail (required at login) and its user (always "sub")
                "emailClaim": "email",
                "audienceClaims": ["aud"],
                "enabledSigningAlgs": ["RS256"],
            },
        }],
    }


ERROR_PAGE = """\
{{define "error.html"}}<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.StatusCode}} {{.Title}}</title>
<style>body{font-family:system-ui,sans-serif;max-width:38rem;margin:4rem auto;padding:0 1rem;\
color:#222;line-height:1.5}small{color:#666}</style>
</head>
<body>
<h1>{{.Title}}</h1>
{{if eq .StatusCode 500}}<p>Signing in to this workload could not be finished: the portal did \
not answer, or refused the sign-in. It may be restarting; try again in a minute. If it keeps \
failing, tell the portal's administrators and give them the request ID below.</p>
{{else if eq .StatusCode 502}}<p>The application behind this address is not answering. It may \
still be starting; try again in a minute.</p>
{{else if eq .StatusCode 403}}<p>You may not open this workload, or signing in failed.</p>
<p>{{.Message}}</p>
{{else}}<p>{{.Message}}</p>
{{end}}{{if .Redirect}}<p><a href="{{.Redirect}}">Try again</a></p>
{{end}}{{if .RequestID}}<p><small>Request ID: {{.RequestID}}</small></p>
{{end}}</body>
</html>
{{end}}
"""


def proxy_files(spec: ProxySpec) -> dict[str, str]:
    """The proxy's files, by key of the workload's Secret (which make_proxy_volumes mounts):
    the alpha configuration and the error page. They hold no secret; they go in the Secret
    because the workload has one already, and it is mounted beside the credentials."""
    config = yaml.dump(proxy_config(spec), Dumper=_ConfigDumper, sort_keys=False,
                       default_flow_style=False)
    header = "# oauth2-proxy v7.15.4 alpha configuration (access/proxy.py)\n"
    return {CONFIG_KEY: header + config, ERROR_PAGE_KEY: ERROR_PAGE}


def _secret_env(spec: ProxySpec) -> list[tuple[str, str]]:
    """(variable, key of the workload's Secret) for each secret the proxy reads."""
    pairs = [(COOKIE_SECRET_ENV, COOKIE_SECRET_KEY), (CLIENT_SECRET_ENV, CLIENT_SECRET_KEY)]
    if spec.upstream_token_env:
        pairs.append((UPSTREAM_TOKEN_ENV, spec.upstream_token_env))
    return pairs


def _authorization_value(token: str) -> str:
    return f"token {token}"  # how Jupyter takes its token in a header


def make_proxy_container(spec: ProxySpec) -> Manifest:
    """The sidecar: the pod's port "http", in front of the application on loopback."""
    env: list[Manifest] = [
        {"name": name, "valueFrom": {"secretKeyRef": {"name": spec.secret_name, "key": key}}}
        for name, key in _secret_env(spec)
    ]
    if spec.upstream_token_env:
        # the kubelet expands $(VAR) from the variables above it
        env.append({"name": UPSTREAM_AUTHORIZATION_ENV,
                    "value": _authorization_value(f"$({UPSTREAM_TOKEN_ENV})")})
    env.append({"name": "GOMEMLIMIT", "value": GO_MEMORY_LIMIT})
    mounts = [{"name": CONFIG_VOLUME, "mountPath": f"{PROXY_DIR}/{CONFIG_DIR}", "readOnly": True}]
    if spec.tls_secret:
        mounts.append({"name": TLS_VOLUME, "mountPath": f"{PROXY_DIR}/{TLS_DIR}",
                       "readOnly": True})
    return {
        "name": PROXY_CONTAINER,
        "image": spec.image,
        "args": proxy_args(spec),
        "workingDir": PROXY_DIR,
        "env": env,
        "ports": [{"name": PORT_NAME, "containerPort": spec.listen_port, "protocol": "TCP"}],
        "readinessProbe": {
            "httpGet": {"path": PING_PATH, "port": PORT_NAME,
                        "scheme": "HTTPS" if spec.tls_secret else "HTTP"},
            "periodSeconds": 5,
            "failureThreshold": 3,
        },
        "resources": {"requests": dict(PROXY_RESOURCES), "limits": dict(PROXY_RESOURCES)},
        "securityContext": restricted_container_security(NONROOT_UID),
        "volumeMounts": mounts,
    }


def make_proxy_volumes(spec: ProxySpec) -> list[Manifest]:
    """The pod's volumes for the sidecar: its files from the workload's Secret (only those keys:
    the credentials stay in the environment), and the TLS Secret where there is one."""
    volumes: list[Manifest] = [{
        "name": CONFIG_VOLUME,
        "secret": {"secretName": spec.secret_name,
                   "items": [{"key": key, "path": path.removeprefix(f"{CONFIG_DIR}/")}
                             for key, path in PROXY_FILE_PATHS.items()]},
    }]
    if spec.tls_secret:
        volumes.append({
            "name": TLS_VOLUME,
            "secret": {"secretName": spec.tls_secret,
                       "items": [{"key": name, "path": name} for name in TLS_FILES]},
        })
    return volumes


def proxy_command(spec: ProxySpec, *, binary: str, secrets: dict[str, str],
                  ) -> tuple[list[str], dict[str, str]]:
    """The same proxy as a local process: its argv and the variables to add to its environment,
    with the Secret's values (`secrets`, by key) given directly. Run it in a folder holding
    proxy_files(spec) at PROXY_FILE_PATHS (and tls/tls.crt, tls/tls.key with TLS)."""
    env = {name: secrets[key] for name, key in _secret_env(spec)}
    if spec.upstream_token_env:
        env[UPSTREAM_AUTHORIZATION_ENV] = _authorization_value(env[UPSTREAM_TOKEN_ENV])
    return [str(binary), *proxy_args(spec)], env
