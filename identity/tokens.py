"""Validation of API callers' Keystone tokens: cached in Redis (bounded by token expiry), asked
once per token at a time, and a refusal remembered for a few seconds.

A validated token is trusted for min(KEYSTONE_TOKEN_CACHE_TTL, time to its expiry); so a token
revoked in Keystone stops working within that TTL. The portal validates with its own service
token (Keystone's `service` role), obtained once and reused until shortly before it expires.

A script that sends 50 requests at once with a token the portal has not seen yet must not send
Keystone 50 validations of it: one request per token asks Keystone ("the flight", a Redis key
taken with SET NX, so across the web server's processes too) and the others wait for its
outcome — the token, a refusal, or "Keystone unavailable" — and take it as their own. The
outcome of a flight is kept only for the requests that waited for it: a request that arrives
later asks again (or finds the token in the cache), so "Keystone unavailable" is never cached.

A token Keystone refused (expired, revoked, garbage) is remembered as refused for
KEYSTONE_TOKEN_REFUSED_TTL seconds, so that a client retrying with a dead token does not send
Keystone a validation each time. Redis being away costs only speed: each request then asks
Keystone itself, as before.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.cache import cache
from prometheus_client import Counter

from .client import CredentialsRejected, KeystoneClient, KeystoneUnavailable, Token, TokenInvalid

log = logging.getLogger(__name__)

TOKEN_CACHE = Counter("portal_keystone_token_cache_total",
                      "Keystone token validations by cache outcome "
                      "(hit, miss, refused: a recent refusal, shared: another request's validation)",
                      ["result"])



class ServiceToken:
    """One of the portal's own tokens, obtained once and reused until five minutes before it
    expires (or until Keystone refuses it: `refresh`). Thread-safe."""

    def __init__(self, obtain: Callable[[KeystoneClient], Token]) -> None:
        self._obtain = obtain
        self._lock = threading.Lock()
        self._token: Token | None = None

    def id(self, client: KeystoneClient, *, refresh: bool = False) -> str:
        with self._lock:
            soon = dt.datetime.now(dt.UTC) + dt.timedelta(minutes=5)
            if refresh or self._token is None or self._token.expires_at <= soon:
                self._token = self._obtain(client)
            return self._token.id


# the project-scoped service token that validates callers' tokens
SERVICE_TOKEN = ServiceToken(KeystoneClient.service_token)

REFUSED = "refused"
UNAVAILABLE = "unavailable"
OUTCOME_SECONDS = 10  # how long a flight's outcome waits for the requests that waited for it
POLL_FIRST, POLL_MAX = 0.01, 0.1  # seconds between looks at a flight in progress


def _cache_key(token_id: str) -> str:
    return "ks-token:" + hashlib.sha256(token_id.encode()).hexdigest()


def _refused_key(key: str) -> str:
    return key.replace("ks-token:", "ks-token-refused:", 1)


def _flight_key(key: str) -> str:
    return key.replace("ks-token:", "ks-token-flight:", 1)


def _outcome_key(flight: str) -> str:
    return f"ks-token-outcome:{flight}"


def _flight_seconds() -> float:
    """The longest one validation may take: Keystone's answer, and once more after renewing
    the service token."""
    timeout: float = settings.KEYSTONE_TIMEOUT
    return 2 * timeout + 2



def _cache_call(method: str, *args: object, **kwargs: object) -> Any:
    """A cache call; None (and a warning) when Redis is away: validation still works."""
    try:
        return getattr(cache, method)(*args, **kwargs)
    except Exception:  # noqa: BLE001 - redis-py's errors and whatever a cache backend raises
        log.warning("token cache unavailable", exc_info=True)
        return None


def validate_token(token_id: str, *, client: KeystoneClient | None = None) -> Token:
    """The token's identity and scope if Keystone (or the cache) says it is valid now.

    Raises TokenInvalid for expired/revoked/garbage tokens and KeystoneUnavailable when
    Keystone cannot be asked and the cache does not know the token.
    """
    if not token_id or len(token_id) > 4096:
        raise TokenInvalid("malformed token")
    key = _cache_key(token_id)
    known = _known(key)
    if known is not None:
        return known
    TOKEN_CACHE.labels("miss").inc()
    deadline = time.monotonic() + _flight_seconds()
    while True:
        flight = uuid.uuid4().hex
        taken = _cache_call("add", _flight_key(key), flight, timeout=int(_flight_seconds()) + 1)
        if taken:
            # a flight that landed between the miss above and this `add` has cached its
            # token: asking Keystone again would be a second validation of the same token
            try:
                known = _known(key, count=False)
            except TokenInvalid:
                _land(key, flight, None)
                raise
            if known is not None:
                _land(key, flight, None)
                TOKEN_CACHE.labels("shared").inc()
                return known
        if taken is None or taken:
            break  # this request asks Keystone (Redis away: every request asks for itself)
        # another request is asking Keystone about this token: take its outcome
        shared = _wait_for_flight(key, deadline)
        if shared is not None:
            TOKEN_CACHE.labels("shared").inc()
            return _outcome(shared)
        known = _known(key)  # it landed before this request could read its outcome
        if known is not None:
            return known
        if time.monotonic() >= deadline:
            flight = ""  # it is taking too long: ask without holding the flight
            break
    try:
        token = _ask_keystone(token_id, client or KeystoneClient())
    except TokenInvalid as exc:
        _cache_call("set", _refused_key(key), str(exc)[:200] or REFUSED,
                    timeout=settings.KEYSTONE_TOKEN_REFUSED_TTL)
        _land(key, flight, {"refused": str(exc)[:200]})
        raise
    except KeystoneUnavailable as exc:
        _land(key, flight, {"unavailable": str(exc)[:200]})
        raise
    except BaseException:
        _land(key, flight, None)
        raise
    remaining = (token.expires_at - dt.datetime.now(dt.UTC)).total_seconds()
    ttl = int(min(settings.KEYSTONE_TOKEN_CACHE_TTL, remaining))
    if ttl > 0:
        _cache_call("set", key, token.to_dict(), ttl)
    _land(key, flight, {"token": token.to_dict()})
    return token


def validate_token_now(token_id: str, *, client: KeystoneClient | None = None) -> Token:
    """Ask Keystone, past the cache: for checks that must see a revocation at once."""
    return _ask_keystone(token_id, client or KeystoneClient())


def _known(key: str, *, count: bool = True) -> Token | None:
    """The token from the cache, or TokenInvalid for a token refused moments ago. `count`:
    count the hit or refusal (a request already counted as a miss is not counted twice)."""
    found = _cache_call("get_many", [key, _refused_key(key)]) or {}
    if key in found:
        token = Token.from_dict(found[key])
        if not token.is_expired():
            if count:
                TOKEN_CACHE.labels("hit").inc()
            return token
    if _refused_key(key) in found:
        if count:
            TOKEN_CACHE.labels("refused").inc()
        raise TokenInvalid(f"refused moments ago: {found[_refused_key(key)]}")
    return None


def _ask_keystone(token_id: str, client: KeystoneClient) -> Token:
    try:
        token = client.validate(token_id, auth_token=SERVICE_TOKEN.id(client))
    except CredentialsRejected:
        # Keystone refused our own service token (expired early, revoked): renew it, ask again
        token = client.validate(token_id, auth_token=SERVICE_TOKEN.id(client, refresh=True))
    if token.is_expired():
        raise TokenInvalid("token expired")
    return token


def _land(key: str, flight: str, outcome: dict[str, Any] | None) -> None:
    """End this request's flight: its outcome for the requests that wait for it, then the
    flight key (so that a request arriving later asks Keystone itself, or finds the cache)."""
    if not flight:
        return
    if outcome is not None:
        _cache_call("set", _outcome_key(flight), outcome, timeout=OUTCOME_SECONDS)
    if _cache_call("get", _flight_key(key)) == flight:
        _cache_call("delete", _flight_key(key))


def _wait_for_flight(key: str, deadline: float) -> dict[str, Any] | None:
    """The outcome of the flight in progress for `key`; None when it ended without one (its
    request failed in another way, or its process died) or the deadline passed."""
    pause = POLL_FIRST
    flight = None
    while time.monotonic() < deadline:
        if flight is None:
            flight = _cache_call("get", _flight_key(key))
            if flight is None:
                return None  # it landed meanwhile: the caller looks at the cache again
        found = _cache_call("get_many", [_outcome_key(flight), _flight_key(key)])
        if found is None:
            return None  # Redis went away
        if _outcome_key(flight) in found:
            outcome: dict[str, Any] | None = found[_outcome_key(flight)]
            return outcome
        if found.get(_flight_key(key)) != flight:
            return None
        time.sleep(pause)
        pause = min(pause * 1.5, POLL_MAX)
    return None


def _outcome(shared: dict[str, Any]) -> Token:
    if "token" in shared:
        return Token.from_dict(shared["token"])
    if "refused" in shared:
        raise TokenInvalid(shared["refused"])
    raise KeystoneUnavailable(shared.get("unavailable") or "Keystone could not be asked")
