"""The webhook POST itself: signed JSON to the address the SSRF check approved, no redirects.

`webhook_post(webhook, payload)` is what the delivery task and the "test" button both send. It
never raises for the receiver's failures: the result says whether the receiver took it, whether
trying again may help (down, timed out, 5xx, 429), and why not, in words that hold no URL (a
Slack incoming-webhook URL is a secret).
"""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Any

import httpx
from django.conf import settings

from .models import Notification, Webhook
from .signing import EVENT_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER, signature
from .webhook_urls import WebhookURLRefused, webhook_target


@dataclasses.dataclass(frozen=True)
class PostResult:
    sent: bool
    status: int | None = None
    error: str = ""
    retry: bool = False  # the receiver may take it later


def signed_request(secret: str, payload: dict[str, Any], event: str,
                   stamp: int | None = None) -> tuple[bytes, dict[str, str]]:
    """The body (compact JSON) and the headers of one POST (notifications/signing.py)."""
    body = json.dumps(payload, separators=(",", ":")).encode()
    stamp = int(time.time()) if stamp is None else stamp
    return body, {"Content-Type": "application/json", "User-Agent": "gpu-portal-webhook/1",
                  TIMESTAMP_HEADER: str(stamp), EVENT_HEADER: event,
                  SIGNATURE_HEADER: signature(secret, stamp, body)}


def webhook_post(webhook: Webhook, payload: dict[str, Any], *, event: str) -> PostResult:
    try:
        target = webhook_target(webhook.url)  # again: the host may resolve elsewhere now
    except WebhookURLRefused as exc:
        return PostResult(sent=False, error=f"refused: {exc}")
    body, headers = signed_request(webhook.secret, payload, event)
    headers["Host"] = target.host_header
    extensions: dict[str, Any] = {
        "timeout": httpx.Timeout(settings.PORTAL_WEBHOOK_TIMEOUT_SECONDS).as_dict()}
    if target.scheme == "https":
        extensions["sni_hostname"] = target.host  # the certificate is checked for the name
    request = httpx.Request("POST", target.connect_url, content=body, headers=headers,
                            extensions=extensions)
    try:
        # the transport, not a Client: no proxy from the environment, no redirects, and no
        # "HTTP Request: POST <url>" log line (httpx's client logs the URL, here a secret)
        with httpx.HTTPTransport() as transport:
            answer = transport.handle_request(request)
            answer.read()
    except httpx.HTTPError as exc:
        # the class name only: httpx's messages may carry the request's URL
        return PostResult(sent=False, error=f"{type(exc).__name__}: the receiver did not answer",
                          retry=True)
    status = answer.status_code
    if answer.is_success:
        return PostResult(sent=True, status=status)
    retry = status >= 500 or status == 429
    # a 3xx is not followed (it could lead anywhere, the portal's own network included)
    return PostResult(sent=False, status=status, error=f"answered {status}", retry=retry)


def webhook_payload(notification: Notification) -> dict[str, Any]:
    """The JSON a receiver gets: `text` for Slack and Mattermost, the fields for the rest."""
    link = (f"{settings.PORTAL_PUBLIC_URL.rstrip('/')}{notification.link}"
            if notification.link else "")
    return {
        "text": f"*{notification.title}*\n{notification.text}" + (f"\n{link}" if link else ""),
        "id": notification.pk,
        "kind": notification.kind,
        "title": notification.title,
        "message": notification.text,
        "user": notification.user.label,
        "user_id": notification.user.username,  # the Keystone user id: the key, not the name
        "project": notification.tenant.name if notification.tenant else None,
        "workload": notification.workload_id,
        "url": link or None,
        "created_at": notification.created_at.isoformat(),
    }


def webhook_test_payload(webhook: Webhook) -> dict[str, Any]:
    """The "test" button's POST: the shape of a notification, kind "test"."""
    title = "Test notification from the GPU portal"
    text = "This webhook works: the portal's notifications will arrive here."
    return {"text": f"*{title}*\n{text}", "id": None, "kind": "test", "title": title,
            "message": text, "user": webhook.user.label if webhook.user else None,
            "user_id": webhook.user.username if webhook.user else None,
            "project": webhook.tenant.name if webhook.tenant else None, "workload": None,
            "url": settings.PORTAL_PUBLIC_URL or None, "created_at": None}
