"""The bell: the signed-in user's unread count on every page, from one indexed count."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from .selectors import unread_count


def notifications_bell(request: HttpRequest) -> dict[str, Any]:
    if getattr(request, "identity", None) is None or not request.user.is_authenticated:
        return {}
    return {"notifications_unread": unread_count(request.user)}
