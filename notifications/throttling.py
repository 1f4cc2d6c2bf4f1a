"""The test button's own rate: test POSTs per user (PORTAL_WEBHOOK_TEST_RATE, e.g.
"10/minute"), for the API and the pages together (one history per user in the shared cache).
Each test is a POST the webhook workers make to an address the user chose: the rate bounds what
one user can ask of them, below the API's general rate."""

from __future__ import annotations

from django.conf import settings

from api.throttling import PortalUserRateThrottle


class WebhookTestThrottle(PortalUserRateThrottle):
    scope = "webhook_test"

    def get_rate(self) -> str | None:
        return getattr(settings, "PORTAL_WEBHOOK_TEST_RATE", None) or None
