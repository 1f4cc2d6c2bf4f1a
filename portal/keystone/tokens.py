"""Validation of API callers' Keystone tokens, with a Redis cache bounded by token expiry.

A validated token is trusted for min(KEYSTONE_TOKEN_CACHE_TTL, time to its expiry); so a token
revoked in Keystone stops working within that TTL. The portal validates with its own service
token (Keystone's `service` role), obtained once and reused until shortly before it expires.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import threading

from django.conf import settings
from django.core.cache import cache
from prometheus_client import Counter

from .client import CredentialsRejected, KeystoneClient, Token, TokenInvalid

log = logging.getLogger(__name__)

TOKEN_CACHE = Counter("portal_keystone_token_cache_total",
                      "Keystone token validations by cache outcome", ["result"])

_service_lock = threading.Lock()
_service_token: Token | None = None


def _cache_key(token_id: str) -> str:
    return "ks-token:" + hashlib.sha256(token_id.encode()).hexdigest()


def _service_token_id(client: KeystoneClient, *, refresh: bool = False) -> str:
    global _service_token
    with _service_lock:
        soon = dt.datetime.now(dt.UTC) + dt.timedelta(minutes=5)
        if refresh or _service_token is None or _service_token.expires_at <= soon:
            _service_token = client.service_token()
        return _service_token.id


def validate_token(token_id: str, *, client: KeystoneClient | None = None) -> Token:
    """The token's identity and scope if Keystone (or the cache) says it is valid now.

    Raises TokenInvalid for expired/revoked/garbage tokens and KeystoneUnavailable when
    Keystone cannot be asked and the cache does not know the token.
    """
    if not token_id or len(token_id) > 4096:
        raise TokenInvalid("malformed token")
    key = _cache_key(token_id)
    try:
        cached = cache.get(key)
    except Exception:  # Redis down: validation still works, only slower
        log.warning("token cache unavailable", exc_info=True)
        cached = None
    if cached is not None:
        token = Token.from_dict(cached)
        if not token.is_expired():
            TOKEN_CACHE.labels("hit").inc()
            return token
    TOKEN_CACHE.labels("miss").inc()
    client = client or KeystoneClient()
    try:
        token = client.validate(token_id, auth_token=_service_token_id(client))
    except CredentialsRejected:
        # Keystone refused our own service token (expired early, revoked): renew it, ask again
        token = client.validate(token_id, auth_token=_service_token_id(client, refresh=True))
    remaining = (token.expires_at - dt.datetime.now(dt.UTC)).total_seconds()
    ttl = int(min(settings.KEYSTONE_TOKEN_CACHE_TTL, remaining))
    if ttl <= 0:
        raise TokenInvalid("token expired")
    try:
        cache.set(key, token.to_dict(), ttl)
    except Exception:
        log.warning("token cache unavailable", exc_info=True)
    return token
