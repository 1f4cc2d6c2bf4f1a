"""What an error report may show: never a caller's credentials, with DEBUG on or off.

Django's error reports (the DEBUG page, the text report of `manage.py runserver`, the e-mails
of AdminEmailHandler) show the request's headers and cookies, its POST data and every local
variable of every frame. A probe with an oversized body got the DEBUG page with its Keystone
token in it (the `identity` local of the authentication frame). Three layers keep that out:

- `PortalExceptionReporterFilter` (DEFAULT_EXCEPTION_REPORTER_FILTER) is active with DEBUG on
  too, hides headers, settings and POST fields whose names say they are credentials (token,
  auth, cookie, session, password, key, secret …), every cookie's value, and local variables
  whose name says so or whose value holds a secret of the request (below);
- `PortalExceptionReporter` (DEFAULT_EXCEPTION_REPORTER) takes those secrets out of the
  finished report as well (an exception's message, the GET parameters, a repr nobody thought
  of);
- `ScrubSecrets`, a logging filter on the portal's log handler, takes token-shaped strings out
  of log lines and their tracebacks.

The request's secrets are the values of its X-Auth-Token and Authorization headers, its cookies
(the session id among them) and the Keystone tokens of its identity; token-shaped strings
(Keystone's Fernet tokens, JSON Web Tokens) are hidden wherever they appear. Keystone's Token
also leaves its id out of its repr (identity/client.py).
"""

from __future__ import annotations

import logging
import re
import traceback
from collections.abc import ItemsView
from typing import Any

from django.http import HttpRequest
from django.utils.safestring import SafeString, mark_safe
from django.views.debug import ExceptionReporter, SafeExceptionReporterFilter

SUBSTITUTE = "********************"

# names of headers, settings, POST fields and local variables that hold credentials
SENSITIVE_NAME = re.compile(
    r"API|AUTH|TOKEN|KEY|SECRET|PASS|SIGNATURE|COOKIE|SESSION|CSRF|CREDENTIAL|PRIVATE|"
    r"IDENTITY|DSN|DATABASE_URL|BROKER|REDIS_URL|BEARER",
    flags=re.IGNORECASE)
# local variables: the same, less the bare "key" (dict keys, idempotency keys are harmless)
SENSITIVE_LOCAL = re.compile(
    r"token|secret|passw|signature|cookie|session|csrf|credential|private|identity|auth|"
    r"api_?key|bearer",
    flags=re.IGNORECASE)
# token-shaped strings: Keystone's Fernet tokens, JSON Web Tokens; SSH certificates (the line,
# or an ed25519 one's blob alone), private keys (OpenSSH's and PKCS#8: a workload's host key)
# and workloads' SSH report tokens (access/ssh.py)
TOKEN_SHAPED = re.compile(
    r"gAAAAA[A-Za-z0-9_\-]{20,}={0,2}"
    r"|eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*"
    r"|[a-z0-9.@-]+-cert-v01@openssh\.com\s+[A-Za-z0-9+/]{16,}={0,2}"
    r"|AAAAIHNzaC1lZDI1NTE5LWNlcnQt[A-Za-z0-9+/]+={0,2}"
    r"|-----BEGIN (?:OPENSSH )?PRIVATE KEY-----[\s\S]*?(?:-----END (?:OPENSSH )?PRIVATE KEY-----|$)"
    r"|workload-\d+-[0-9a-f]{16}\.[A-Za-z0-9_\-]{40,}")
MIN_SECRET_LENGTH = 8  # shorter values (an empty cookie, "1") would blank out half the page


def request_secrets(request: Any) -> list[str]:
    """The credentials a request carries, longest first: its X-Auth-Token, its Authorization
    header (whole, and its credential part), its cookies' values, its identity's tokens."""
    found: set[str] = set()
    meta = getattr(request, "META", None) or {}
    for name in ("HTTP_X_AUTH_TOKEN", "HTTP_AUTHORIZATION", "HTTP_X_SUBJECT_TOKEN"):
        value = meta.get(name)
        if isinstance(value, str):
            found.add(value.strip())
            found.add(value.strip().partition(" ")[2].strip())
    cookies = getattr(request, "COOKIES", None) or {}
    found.update(value for value in cookies.values() if isinstance(value, str))
    session = getattr(request, "session", None)
    session_key = getattr(session, "session_key", None)
    if isinstance(session_key, str):
        found.add(session_key)
    identity = getattr(request, "identity", None)
    for token in (getattr(identity, "unscoped", None), getattr(identity, "scoped", None)):
        token_id = getattr(token, "id", None)
        if isinstance(token_id, str):
            found.add(token_id)
    return sorted((s for s in found if len(s) >= MIN_SECRET_LENGTH), key=len, reverse=True)


def scrub(text: str, secrets: list[str] = ()) -> str:  # type: ignore[assignment]
    """`text` with the given secrets and every token-shaped string replaced by SUBSTITUTE."""
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, SUBSTITUTE)
    return TOKEN_SHAPED.sub(SUBSTITUTE, text)


class _Shown:
    """A value as the report shows it (pprint of this is the text itself)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


class PortalExceptionReporterFilter(SafeExceptionReporterFilter):
    cleansed_substitute = SUBSTITUTE
    hidden_settings = SENSITIVE_NAME

    def is_active(self, request: HttpRequest | None) -> bool:
        return True  # with DEBUG on as well: a developer's page is a page too

    def get_safe_request_meta(self, request: HttpRequest) -> dict[str, Any]:
        secrets = request_secrets(request)
        return {key: scrub(value, secrets) if isinstance(value, str) else value
                for key, value in super().get_safe_request_meta(request).items()}

    def get_safe_cookies(self, request: HttpRequest) -> dict[str, Any]:
        return {name: self.cleansed_substitute for name in getattr(request, "COOKIES", {})}

    def get_post_parameters(self, request: HttpRequest | None) -> dict[str, Any]:
        parameters = super().get_post_parameters(request)
        if not parameters or not any(SENSITIVE_NAME.search(name) for name in parameters):
            return parameters
        parameters = parameters.copy()
        for name in list(parameters):
            if SENSITIVE_NAME.search(name):
                parameters[name] = self.cleansed_substitute
        return parameters

    def get_traceback_frame_variables(self, request: Any, tb_frame: Any) -> ItemsView[str, Any]:
        secrets = request_secrets(request)
        shown: dict[str, Any] = {}
        for name, value in super().get_traceback_frame_variables(request, tb_frame):
            if isinstance(value, str) and value == self.cleansed_substitute:
                pass  # hidden already (sensitive_variables)
            elif SENSITIVE_LOCAL.search(str(name)):
                value = self.cleansed_substitute
            else:
                try:
                    text = repr(value)
                except Exception:  # noqa: BLE001 - a broken repr must not break the report
                    text = f"<{type(value).__name__} whose repr failed>"
                cleaned = scrub(text, secrets)
                if cleaned != text:
                    value = _Shown(cleaned)
            shown[name] = value
        return shown.items()


class PortalExceptionReporter(ExceptionReporter):
    """Django's report, with the request's secrets taken out of the finished text too."""

    def _scrub(self, text: str) -> str:
        return scrub(text, request_secrets(self.request))

    # safe still: what the scrub puts in is the substitute, plain text
    def get_traceback_html(self) -> SafeString:
        return mark_safe(self._scrub(super().get_traceback_html()))

    def get_traceback_text(self) -> SafeString:
        return mark_safe(self._scrub(super().get_traceback_text()))


class ScrubSecrets(logging.Filter):
    """Token-shaped strings out of log lines and their tracebacks (never drops a record)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a bad format string is logging's own business
            return True
        cleaned = scrub(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        if record.exc_info and not record.exc_text:
            text = "".join(traceback.format_exception(*record.exc_info)).rstrip("\n")
            record.exc_text = scrub(text)
        elif record.exc_text:
            record.exc_text = scrub(record.exc_text)
        return True
