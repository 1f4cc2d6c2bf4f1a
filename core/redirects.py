"""Where a page may send the browser after a form: only back to this portal, never elsewhere."""

from __future__ import annotations

from django.http import HttpRequest
from django.utils.http import url_has_allowed_host_and_scheme


def safe_redirect_target(request: HttpRequest, candidate: str | None) -> str | None:
    """`candidate` (a `next` parameter) when it points into this portal, else None."""
    if candidate and url_has_allowed_host_and_scheme(
        candidate, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return candidate
    return None
