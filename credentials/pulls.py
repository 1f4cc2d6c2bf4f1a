"""Whether a launch's image can be pulled with its registry secrets: the image's manifest resolved
the way a kubelet's container runtime resolves it, before any pod waits in ImagePullBackOff.

What is sent is what a kubelet would send: the login comes from the `.dockerconfigjson` of the
Kubernetes Secret the pod names in `imagePullSecrets` (read from the cluster, not from anything
the portal kept), picked by the registry host of the image as the kubelet picks an `auths` entry.
The handshake is the registry API's: the manifest is asked for; a 401 names the challenge; a
Basic challenge is answered with the user and password, a Bearer one by trading them at the
token service the challenge names (`realm`, `service`, the pull `scope` of the repository) for a
token; the manifest is asked for again with it. Loopback registries are spoken to in plain
HTTP, as Docker (127.0.0.0/8 is its default insecure range) and containerd's CRI do; every
other registry in HTTPS with the system's trusted certificates.

The answer is a PullCheck: `resolved` with the manifest's digest; `refused` with a code
(`registry_login_failed`: the registry or its token service refused the user and password;
`image_not_readable`: the login holds but may not pull this repository; `image_not_found`: no
such repository, tag or digest); or `unreachable` (a timeout, a refused connection, a 5xx, an
answer no registry gives): the registry could not say, and a launch goes ahead. No message
quotes a password, a token or an `auth` value: only the secret's name, the registry, the
repository and the tag.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import hashlib
import ipaddress
import json
import logging
import re
import ssl
import time
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

import httpx

from catalogue.images import DEFAULT_TAG, DOCKER_HUB, parse_image_reference
from kube.client import Kube, KubeError

from .manifests import DOCKER_CONFIG_KEY, REGISTRY, SecretUse

log = logging.getLogger(__name__)

RESOLVED, REFUSED, UNREACHABLE = "resolved", "refused", "unreachable"
LOGIN_FAILED = "registry_login_failed"
NOT_READABLE = "image_not_readable"
NOT_FOUND = "image_not_found"
# every manifest kind a runtime takes: an OCI index or image, a Docker list or image
ACCEPT = ", ".join((
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.docker.distribution.manifest.v2+json",
))
# Docker Hub's API host, and the names its logins are kept under in a docker config
HUB_API = "registry-1.docker.io"
HUB_KEYS = ("docker.io", "index.docker.io", "registry-1.docker.io", "https://index.docker.io/v1/")
_CHALLENGE_PARAM = re.compile(r'(\w+)="([^"]*)"')
# what is read of an answer at most: a registry keeps a manifest within 4 MiB (Distribution's
# limit), and a token answer is far smaller
MAX_BODY = 4 * 1024 * 1024


@dataclasses.dataclass(frozen=True)
class PullCheck:
    outcome: str
    code: str = ""
    message: str = ""
    digest: str = ""

    @property
    def refused(self) -> bool:
        return self.outcome == REFUSED


@dataclasses.dataclass(frozen=True)
class Login:
    secret: str  # the portal secret's name, for messages
    username: str
    password: str = dataclasses.field(repr=False)


def _loopback(host: str) -> bool:
    name = urlsplit(f"//{host}").hostname or ""
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _key_host(key: str) -> str:
    """An `auths` key's registry host (and port): keys are `host[:port]`, with or without a
    scheme and a path (`https://index.docker.io/v1/`)."""
    return (urlsplit(key if "://" in key else f"//{key}").netloc or "").lower()


def _same_registry(key: str, host: str) -> bool:
    if host == DOCKER_HUB:
        return key in HUB_KEYS or _key_host(key) in HUB_KEYS
    return _key_host(key) == host


def logins_for(config: Any, host: str, secret: str) -> list[Login]:
    """The logins of a `.dockerconfigjson` for the registry `host`: each `auths` entry whose key
    names it, its user and password from `username`/`password` or else from `auth`."""
    found = []
    auths = config.get("auths") if isinstance(config, dict) else None
    for key, entry in (auths or {}).items():
        if not isinstance(entry, dict) or not _same_registry(str(key), host):
            continue
        username, password = entry.get("username") or "", entry.get("password") or ""
        if not (username and password) and entry.get("auth"):
            try:
                username, _, password = base64.b64decode(entry["auth"]).decode().partition(":")
            except ValueError:
                continue
        if username and password:
            found.append(Login(secret=secret, username=username, password=password))
    return found


def _challenge(header: str) -> tuple[str, dict[str, str]]:
    scheme, _, params = header.strip().partition(" ")
    return scheme.lower(), dict(_CHALLENGE_PARAM.findall(params))


def _basic(login: Login) -> str:
    return "Basic " + base64.b64encode(f"{login.username}:{login.password}".encode()).decode()


class _Unreachable(Exception):
    pass


@functools.cache
def _tls() -> ssl.SSLContext:
    """The system's trusted certificates, as the node's runtime trusts them; made once (a
    context per check would cost more than the check's requests)."""
    return ssl.create_default_context()


def _get(client: httpx.Client, url: str, *, headers: dict[str, str], timeout: float,
         params: dict[str, str] | None = None) -> httpx.Response:
    """GET, its body read up to MAX_BODY (a larger one is no registry's answer)."""
    with client.stream("GET", url, headers=headers, params=params, timeout=timeout) as answer:
        body = bytearray()
        for chunk in answer.iter_bytes():
            body += chunk
            if len(body) > MAX_BODY:
                raise _Unreachable("it answered more than a manifest holds")
        return httpx.Response(answer.status_code, headers=answer.headers, content=bytes(body))


def resolve(image: str, login: Login | None, *, timeout: float,
            transport: httpx.BaseTransport | None = None) -> PullCheck:
    """Resolve `image`'s manifest with `login` (None: anonymously) within about `timeout`
    seconds in all."""
    ref = parse_image_reference(image)
    host = (ref.domain or DOCKER_HUB).lower()
    api_host = HUB_API if host in (DOCKER_HUB, "index.docker.io") else host
    repository = ref.repository.split("/", 1)[1]
    reference = ref.digest or ref.tag or DEFAULT_TAG
    shown = f"{host}/{repository}:{reference}" if not ref.digest else \
        f"{host}/{repository}@{reference}"
    who = f"the login of the secret {login.secret}" if login else "an anonymous pull"
    url = f"{'http' if _loopback(api_host) else 'https'}://{api_host}/v2/{repository}" \
          f"/manifests/{reference}"
    deadline = time.monotonic() + timeout

    def left() -> float:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise _Unreachable(f"no answer within {timeout:g} s")
        return remaining

    try:
        with httpx.Client(transport=transport, follow_redirects=True, verify=_tls()) as client:
            headers = {"Accept": ACCEPT}
            answer = _get(client, url, headers=headers, timeout=left())
            if answer.status_code == 401:
                scheme, params = _challenge(answer.headers.get("WWW-Authenticate", ""))
                if scheme == "basic":
                    if login is None:
                        return PullCheck(REFUSED, NOT_READABLE, f"{host} asks for a login to "
                                         f"pull {shown}; give a registry secret for {host}.")
                    headers["Authorization"] = _basic(login)
                elif scheme == "bearer" and params.get("realm"):
                    token = _token(client, params, repository, login, left())
                    if token is None:
                        return PullCheck(REFUSED, LOGIN_FAILED,
                                         f"{host} refused {who}: check its user and password "
                                         "(replace the secret's value).")
                    headers["Authorization"] = f"Bearer {token}"
                else:
                    raise _Unreachable("it asked for a login of a kind a kubelet cannot give")
                answer = _get(client, url, headers=headers, timeout=left())
                if answer.status_code == 401 and scheme == "basic":
                    return PullCheck(REFUSED, LOGIN_FAILED,
                                     f"{host} refused {who}: check its user and password "
                                     "(replace the secret's value).")
            return _outcome(answer, host=host, shown=shown, who=who)
    except httpx.TimeoutException:
        return PullCheck(UNREACHABLE, message=f"{host} could not be asked for {shown} (no "
                                              f"answer within {timeout:g} s); the launch goes "
                                              "ahead unchecked.")
    except (httpx.HTTPError, httpx.InvalidURL, _Unreachable) as exc:
        reason = str(exc) if isinstance(exc, _Unreachable) else type(exc).__name__
        return PullCheck(UNREACHABLE, message=f"{host} could not be asked for {shown} "
                                              f"({reason}); the launch goes ahead unchecked.")


def login_check(server: str, username: str, password: str, *, timeout: float,
                transport: httpx.BaseTransport | None = None) -> PullCheck:
    """Whether `server` takes the login, as `docker login` asks it: `/v2/`, then its challenge
    answered (a Basic login at `/v2/` again, or a token asked of its token service for the
    account, no repository named). `resolved`: it does (or asks for none); `refused`
    (registry_login_failed): it refused them; `unreachable`: it could not say."""
    host = server.lower()
    api_host = HUB_API if host in (DOCKER_HUB, "index.docker.io") else host
    url = f"{'http' if _loopback(api_host) else 'https'}://{api_host}/v2/"
    login = Login(secret="", username=username, password=password)
    refused = PullCheck(REFUSED, LOGIN_FAILED, f"{host} refused this user and password: check "
                                               "them and give them again.")
    try:
        with httpx.Client(transport=transport, follow_redirects=True, verify=_tls()) as client:
            answer = _get(client, url, headers={}, timeout=timeout)
            if answer.status_code == 401:
                scheme, params = _challenge(answer.headers.get("WWW-Authenticate", ""))
                if scheme == "basic":
                    answer = _get(client, url, headers={"Authorization": _basic(login)},
                                  timeout=timeout)
                    if answer.status_code == 401:
                        return refused
                elif scheme == "bearer" and params.get("realm"):
                    query = {"account": username}
                    if params.get("service"):
                        query["service"] = params["service"]
                    answer = _get(client, _realm(params), params=query, timeout=timeout,
                                  headers={"Authorization": _basic(login)})
                    if answer.status_code in (401, 403):
                        return refused
                else:
                    raise _Unreachable("it asked for a login of a kind a kubelet cannot give")
            if answer.status_code != 200:
                raise _Unreachable(f"it answered {answer.status_code}")
    except httpx.TimeoutException:
        return PullCheck(UNREACHABLE, message=f"{host} did not answer within {timeout:g} s; "
                                              "the login was not tried.")
    except (httpx.HTTPError, httpx.InvalidURL, _Unreachable) as exc:
        reason = str(exc) if isinstance(exc, _Unreachable) else type(exc).__name__
        return PullCheck(UNREACHABLE, message=f"{host} could not be asked ({reason}); the "
                                              "login was not tried.")
    return PullCheck(RESOLVED, message=f"{host} takes this login.")


def _realm(params: dict[str, str]) -> str:
    """The challenge's token service, where the login goes: HTTPS, or plain HTTP on loopback
    only (a password is never sent in the clear across a network, whatever a registry asks)."""
    realm = params["realm"]
    try:
        url = urlsplit(realm)
    except ValueError:
        raise _Unreachable("its token service's address is no URL") from None
    if url.scheme != "https" and not (url.scheme == "http" and _loopback(url.netloc)):
        raise _Unreachable("its token service is not HTTPS")
    return realm


def _token(client: httpx.Client, params: dict[str, str], repository: str, login: Login | None,
           timeout: float) -> str | None:
    """A Bearer token for pulling `repository` from the challenge's token service; None when
    the service refused the login."""
    query = {"scope": params.get("scope") or f"repository:{repository}:pull"}
    if params.get("service"):
        query["service"] = params["service"]
    headers = {"Authorization": _basic(login)} if login else {}
    answer = _get(client, _realm(params), params=query, headers=headers, timeout=timeout)
    if answer.status_code in (401, 403):
        return None
    if answer.status_code != 200:
        raise _Unreachable(f"its token service answered {answer.status_code}")
    try:
        body = answer.json()
        token = body.get("token") or body.get("access_token")
    except (ValueError, AttributeError):
        token = None
    if not isinstance(token, str) or not token:
        raise _Unreachable("its token service answered without a token")
    return token


def _outcome(answer: httpx.Response, *, host: str, shown: str, who: str) -> PullCheck:
    if answer.status_code == 200:
        # the registry's digest where it gives one (the node records that one), else the body's
        digest = answer.headers.get("Docker-Content-Digest") or \
            f"sha256:{hashlib.sha256(answer.content).hexdigest()}"
        return PullCheck(RESOLVED, digest=digest,
                         message=f"{shown} resolves to {digest[:19]}… with {who}.")
    if answer.status_code in (401, 403):
        return PullCheck(REFUSED, NOT_READABLE,
                         f"{host} does not let {who} pull {shown}: the account may not read "
                         "that repository.")
    if answer.status_code == 404:
        # a registry may say NAME_UNKNOWN for a repository it has not and MANIFEST_UNKNOWN for
        # a tag, or (Distribution) MANIFEST_UNKNOWN for both: one message for either
        return PullCheck(REFUSED, NOT_FOUND, f"{host} has no image {shown}: check the image's "
                                             "name and tag.")
    raise _Unreachable(f"it answered {answer.status_code}")


def image_pull_check(*, image: str, uses: Iterable[SecretUse], namespace: str,
                     timeout: float, kube: Kube | None = None,
                     transport: httpx.BaseTransport | None = None) -> PullCheck | None:
    """The launch's image resolved with the logins its registry secrets hold for the image's
    registry, read from their Kubernetes Secrets in `namespace` as a kubelet reads them; each
    login tried in turn, as the runtime tries each matching pull secret. None when no registry
    secret of the launch logs in to that registry (nothing to check: the pull is anonymous)."""
    ref = parse_image_reference(image)
    host = (ref.domain or DOCKER_HUB).lower()
    if host == "index.docker.io":
        host = DOCKER_HUB
    logins: list[Login] = []
    kube = kube or Kube()
    for use in uses:
        if use.kind != REGISTRY:
            continue
        try:
            obj = kube.get("Secret", use.object_name, namespace)
        except KubeError as exc:
            return PullCheck(UNREACHABLE, message=f"The cluster did not give the secret "
                                                  f"{use.name} ({exc.__class__.__name__}); the "
                                                  "launch goes ahead unchecked.")
        raw = ((obj or {}).get("data") or {}).get(DOCKER_CONFIG_KEY)
        if not raw:
            continue  # gone: the launch's own check of lost secrets tells that
        try:
            config = json.loads(base64.b64decode(raw))
        except ValueError:
            continue
        logins += logins_for(config, host, use.name)
    if not logins:
        return None
    first: PullCheck | None = None
    for login in logins:
        check = resolve(image, login, timeout=timeout, transport=transport)
        if check.outcome == RESOLVED:
            return check
        first = first or check
    assert first is not None
    if first.outcome == UNREACHABLE:
        log.warning("image pull check of %s in %s: %s", image, namespace, first.message)
    return first
