"""Per-user rate limiting of the API (DRF throttling): 429 with Retry-After past the rate.

The rate is read from settings on every request (PORTAL_API_THROTTLE_RATE, e.g. "600/minute"),
so an operator or a test can change it without re-importing DRF's throttle classes, which
otherwise freeze DEFAULT_THROTTLE_RATES at import. The request history lives in the shared
cache (Redis), so the limit holds across web replicas; when Redis is down the API keeps
serving, unthrottled, rather than failing.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from django.conf import settings
from rest_framework.throttling import UserRateThrottle

if TYPE_CHECKING:  # DRF imports this module from its settings, while rest_framework.views loads
    from rest_framework.request import Request
    from rest_framework.views import APIView

log = logging.getLogger(__name__)


class PortalUserRateThrottle(UserRateThrottle):
    """One budget per portal user (token and browser session alike), keyed by user id."""

    scope = "user"

    def get_rate(self) -> str | None:
        return getattr(settings, "PORTAL_API_THROTTLE_RATE", None) or None

    def allow_request(self, request: Request, view: APIView) -> bool:
        self.rate = self.get_rate()
        if self.rate is None:
            return True
        self.num_requests, self.duration = self.parse_rate(self.rate)
        try:
            return super().allow_request(request, view)
        except Exception:  # the cache is an optimisation, never a reason to refuse service
            log.warning("throttle cache unavailable; request not throttled", exc_info=True)
            return True
