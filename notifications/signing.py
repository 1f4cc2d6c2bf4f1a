"""The webhook's signature: what a receiver checks, pure.

Headers on every POST: `X-GPU-Portal-Timestamp` (Unix seconds) and `X-GPU-Portal-Signature`
= "sha256=" + hex HMAC-SHA256(secret, "<timestamp>.<body>") — the body as sent, byte for byte
(the scheme Stripe and Slack use: a receiver refuses an old timestamp, so a captured request
cannot be replayed later).
"""

from __future__ import annotations

import hashlib
import hmac

SIGNATURE_HEADER = "X-GPU-Portal-Signature"
TIMESTAMP_HEADER = "X-GPU-Portal-Timestamp"
EVENT_HEADER = "X-GPU-Portal-Event"


def signature(secret: str, timestamp: int, body: bytes) -> str:
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def signature_valid(secret: str, timestamp: str, body: bytes, given: str, *, now: int,
                    tolerance: int = 300) -> bool:
    """What a receiver does: the signature matches and the timestamp is recent."""
    try:
        stamp = int(timestamp)
    except ValueError:
        return False
    if abs(now - stamp) > tolerance:
        return False
    return hmac.compare_digest(signature(secret, stamp, body), given)
