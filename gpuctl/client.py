"""The portal's REST API over HTTP (httpx), with a Keystone token from keystoneauth1.

A token is fetched once per run and sent as X-Auth-Token; if the portal answers 401 (the
token expired or was revoked meanwhile) a fresh one is fetched and the request is made once
more. Errors come back as the API's `{code, category, detail, fields}` in ApiError; each
error here has a category, which decides gpuctl's exit code (errors.py).
"""

from __future__ import annotations

import contextlib
import functools
import ssl
from collections.abc import Iterable, Iterator
from typing import Any

import httpx
from keystoneauth1 import exceptions as ks_exceptions
from keystoneauth1 import session as ks_session
from keystoneauth1.identity import v3

from .config import Config, ConfigError, Credentials
from .errors import GpuctlError

USER_AGENT = "gpuctl/0.1"


class AuthError(GpuctlError):
    """Keystone refused the credentials, or the portal refused the token (exit code 3)."""

    category = "auth"

    def __str__(self) -> str:
        return f"authentication failed: {super().__str__()}"


class Unreachable(GpuctlError):
    """The portal or Keystone cannot be reached (exit code 7)."""

    category = "unavailable"


# what an error's status says when the body names no category (a proxy's answer, an older
# portal): the portal's own derivation, api/errors.py, for the statuses that decide exit codes
_CATEGORY_BY_STATUS = {401: "auth", 403: "forbidden", 404: "not_found", 409: "conflict",
                       429: "rate_limited", 500: "internal", 502: "unavailable",
                       503: "unavailable", 504: "unavailable"}


class ApiError(GpuctlError):
    """An error answer: `code` exactly what happened, `category` the kind of error (one of the
    API's few: invalid, auth, forbidden, not_found, conflict, admission, rate_limited,
    unavailable, internal), which gpuctl's exit codes follow."""

    def __init__(self, status: int, code: str, detail: str, fields: dict[str, Any] | None = None,
                 category: str | None = None):
        super().__init__(detail)
        self.status = status
        self.code = code
        self.detail = detail
        self.fields = fields or {}
        self.category = category or _CATEGORY_BY_STATUS.get(status, "invalid")

    def __str__(self) -> str:
        text = f"{self.detail} ({self.status} {self.code})"
        for field, problems in self.fields.items():
            if isinstance(problems, list):
                problems = "; ".join(str(p) for p in problems)
            text += f"\n  {field}: {problems}"
        return text


def _given(value: str | None, variable: str) -> str:
    """A credential the method needs (config._check made sure of it when it loaded them)."""
    if not value:
        raise ConfigError(f"missing {variable}")
    return value


def keystone_auth(c: Credentials) -> v3.Auth:
    # no domain named: Default, as openstackclient does (--os-default-domain)
    user_domain_id = c.user_domain_id or (None if c.user_domain_name else "default")
    project_domain_id = c.project_domain_id or (None if c.project_domain_name else "default")
    if c.method == "application_credential":
        # no scope may be asked: it comes with the credential
        return v3.ApplicationCredential(
            auth_url=c.auth_url, application_credential_id=c.application_credential_id,
            application_credential_name=c.application_credential_name,
            application_credential_secret=_given(c.application_credential_secret,
                                                 "OS_APPLICATION_CREDENTIAL_SECRET"),
            username=c.username, user_id=c.user_id, user_domain_name=c.user_domain_name,
            user_domain_id=user_domain_id)
    if c.method == "token":
        return v3.Token(auth_url=c.auth_url, token=_given(c.token, "OS_TOKEN"),
                        project_name=c.project_name, project_id=c.project_id,
                        project_domain_name=c.project_domain_name,
                        project_domain_id=project_domain_id)
    return v3.Password(auth_url=c.auth_url, username=c.username, user_id=c.user_id,
                       password=_given(c.password, "OS_PASSWORD"),
                       user_domain_name=c.user_domain_name, user_domain_id=user_domain_id,
                       project_name=c.project_name, project_id=c.project_id,
                       project_domain_name=c.project_domain_name,
                       project_domain_id=project_domain_id)


@functools.lru_cache(maxsize=4)
def tls_context(insecure: bool, cacert: str | None) -> ssl.SSLContext:
    """The TLS of the portal's requests and of a workload's wss:// address: the configured CA,
    else httpx's (certifi's bundle, or SSL_CERT_FILE), or none checked with `insecure`. Made
    once per process: reading a CA bundle costs some 10 ms of CPU, and a program that runs
    several commands (a script importing gpuctl, the tests) would pay it for each."""
    if insecure:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context
    if cacert:
        return ssl.create_default_context(cafile=cacert)
    return httpx.create_ssl_context()


class PortalClient:
    def __init__(self, config: Config, *, timeout: float = 30.0) -> None:
        c = config.credentials
        verify: bool | str = False if c.insecure else (c.cacert or True)
        self.config = config
        self._auth = keystone_auth(c)
        self._session = ks_session.Session(auth=self._auth, verify=verify, timeout=timeout,
                                           user_agent=USER_AGENT)
        self._http = httpx.Client(base_url=config.portal_url, timeout=timeout,
                                  verify=self.ssl_context(),
                                  headers={"User-Agent": USER_AGENT,
                                           "Accept": "application/json"})

    def close(self) -> None:
        self._http.close()

    def ssl_context(self) -> ssl.SSLContext:
        c = self.config.credentials
        return tls_context(c.insecure, c.cacert or None)

    def token(self, *, fresh: bool = False) -> str:
        if fresh:
            self._auth.invalidate()
        try:
            token = self._session.get_token()
        except ks_exceptions.Unauthorized as exc:
            raise AuthError(f"Keystone refused the credentials ({self.config.source})") from exc
        except (ks_exceptions.ConnectFailure, ks_exceptions.ConnectTimeout,
                ks_exceptions.DiscoveryFailure) as exc:
            raise Unreachable(f"Keystone at {self.config.credentials.auth_url} cannot be "
                              f"reached: {exc}") from exc
        except ks_exceptions.ClientException as exc:
            raise AuthError(f"Keystone: {exc}") from exc
        if not token:
            raise AuthError("Keystone gave no token")
        return token

    def request(self, method: str, path: str, *, params: dict[str, Any] | None = None,
                json: Any = None, headers: dict[str, str] | None = None,
                accept: str | None = None) -> httpx.Response:
        path = "/api/v1/" + path.lstrip("/")
        params = {k: v for k, v in (params or {}).items() if v not in (None, "", [])}
        for attempt in (0, 1):
            all_headers = {"X-Auth-Token": self.token(fresh=attempt == 1), **(headers or {})}
            if accept:
                all_headers["Accept"] = accept
            try:
                response = self._http.request(method, path, params=params, json=json,
                                              headers=all_headers)
            except httpx.TransportError as exc:
                raise Unreachable(f"the portal at {self.config.portal_url} cannot be reached: "
                                  f"{exc}") from exc
            if response.status_code != 401:
                break
        if response.status_code >= 400:
            raise _api_error(response)
        return response

    @contextlib.contextmanager
    def stream(self, method: str, path: str, *, params: dict[str, Any] | None = None,
               content: Iterable[bytes] | None = None,
               headers: dict[str, str] | None = None) -> Iterator[httpx.Response]:
        """A request whose body (`content`, pieces as they come) and answer (read with
        iter_bytes) are streamed, never held whole: the files of a volume. No second try with
        a fresh token: a body streamed once cannot be sent again."""
        all_headers = {"X-Auth-Token": self.token(), **(headers or {})}
        try:
            with self._http.stream(method, "/api/v1/" + path.lstrip("/"), params=params,
                                   content=content, headers=all_headers,
                                   timeout=httpx.Timeout(30.0, read=600.0)) as response:
                if response.status_code >= 400:
                    response.read()
                    raise _api_error(response)
                yield response
        except httpx.TransportError as exc:
            raise Unreachable(f"the portal at {self.config.portal_url} cannot be reached: "
                              f"{exc}") from exc

    def get(self, path: str, **params: Any) -> Any:
        return self.request("GET", path, params=params).json()

    def post(self, path: str, body: Any = None, *, headers: dict[str, str] | None = None) -> Any:
        response = self.request("POST", path, json=body if body is not None else {},
                                headers=headers)
        return response.json() if response.content else None

    def put(self, path: str, body: Any) -> Any:
        return self.request("PUT", path, json=body).json()

    def patch(self, path: str, body: Any) -> Any:
        return self.request("PATCH", path, json=body).json()

    def delete(self, path: str) -> None:
        self.request("DELETE", path)

    def get_all(self, path: str, *, limit: int | None = None, **params: Any) -> list[dict[str, Any]]:
        """Every page of a paginated list (or the first `limit` rows)."""
        rows: list[dict[str, Any]] = []
        page = 1
        page_size = min(limit, 500) if limit else 500
        while True:
            body = self.get(path, page=page, page_size=page_size, **params)
            if isinstance(body, list):  # an unpaginated list
                return body[:limit] if limit else body
            rows += body["results"]
            if not body.get("next") or (limit and len(rows) >= limit):
                return rows[:limit] if limit else rows
            page += 1


def _api_error(response: httpx.Response) -> ApiError:
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and "detail" in body:
        return ApiError(response.status_code, str(body.get("code") or "error"),
                        str(body["detail"]), body.get("fields") or {},
                        category=str(body.get("category") or "") or None)
    text = response.text.strip().splitlines()[0][:200] if response.text.strip() else ""
    return ApiError(response.status_code, "error",
                    text or response.reason_phrase or "request failed")
