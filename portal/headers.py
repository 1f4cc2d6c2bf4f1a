"""Headers every page and API answer carries: what a browser or a proxy may keep of it.

`NoStoreMiddleware` marks every response the portal renders `Cache-Control: no-store` (with
Django's `add_never_cache_headers`: also `no-cache, must-revalidate, private`, `max-age=0` and
an `Expires` in the past), unless its view chose its own: the pages of a signed-in user and the
whole API show a project's workloads, tokens and quotas, which a shared machine's browser cache
or a proxy must not keep, and an anonymous page (the login form) holds a CSRF token. It sits
after WhiteNoise, which answers static files itself with their own long-lived, hashed names.

The Content-Security-Policy comes from django-csp (settings.CONTENT_SECURITY_POLICY): scripts and
styles only from the portal's own origin, none inline; the templates keep their scripts and styles
in static/.
"""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponseBase
from django.utils.cache import add_never_cache_headers


class NoStoreMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        response = self.get_response(request)
        if not response.has_header("Cache-Control"):
            add_never_cache_headers(response)
        return response
