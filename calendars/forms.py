"""The calendar's forms: their fields turned into the shape `validation.reservation_clean` and
`validation.window_clean` read (the API's bodies), so that the pages and the API validate alike.

A browser's date-and-time field has no zone: it is read in the portal's time zone (the pages
say which)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from django.utils import timezone
from django.utils.dateparse import parse_datetime

from core.validation import Refused, as_whole, whole_number

MAX_ALLOWANCE_HOURS = 1_000_000
MAX_DAYS_AHEAD = 366


def zoned(text: str) -> str:
    """"2026-12-01T09:00" (a datetime-local field) → the same instant with the portal's zone,
    ISO 8601; text that is not a date and time, or has a zone already, is left to the
    validation."""
    text = (text or "").strip()
    try:
        parsed = parse_datetime(text)
    except ValueError:
        return text
    if parsed is None or timezone.is_aware(parsed):
        return text
    return timezone.make_aware(parsed).isoformat()


def local_input(when: dt.datetime | None) -> str:
    """A datetime as a datetime-local field's value, in the portal's time zone."""
    return f"{timezone.localtime(when):%Y-%m-%dT%H:%M}" if when is not None else ""


def reservation_form_data(post: Mapping[str, Any]) -> dict[str, Any]:
    """The booking form as a reservation body (the tenant is the view's business)."""
    text = (post.get("count") or "").strip()
    count = as_whole(text)  # otherwise the validation says what a count must be
    weekly = bool(post.get("weekly"))
    data: dict[str, Any] = {"gpu_type": post.get("gpu_type", ""),
                            "count": text if count is None else count,
                            "start": zoned(post.get("start", "")),
                            "end": zoned(post.get("end", "")),
                            "recurrence": "weekly" if weekly else "",
                            "note": post.get("note", "")}
    if weekly:
        data["until"] = zoned(post.get("until", ""))
    return data


def window_form_data(post: Mapping[str, Any]) -> dict[str, Any]:
    """The announcement form as a window body: what it covers is one of the node names (one
    per line or comma), a label selector ("key=value,…") or a GPU type."""
    covers = post.get("covers", "gpu_type")
    data: dict[str, Any] = {"start": zoned(post.get("start", "")),
                            "end": zoned(post.get("end", "")),
                            "reason": post.get("reason", ""), "drain": bool(post.get("drain"))}
    if covers == "nodes":
        text = post.get("nodes", "")
        data["nodes"] = [n.strip() for n in text.replace("\n", ",").split(",") if n.strip()]
    elif covers == "node_selector":
        data["node_selector"] = post.get("node_selector", "")
    else:
        data["gpu_type"] = post.get("gpu_type", "")
    relayout = relayout_form_data(post.get("relayout", ""))
    if relayout:
        data["relayout"] = relayout
    return data


def relayout_form_data(text: str) -> dict[str, dict[str, Any]]:
    """The re-layout field, one node a line ("gpu-a100-mig-1=all-3g.40gb",
    "gpu-t4-shared-1=replicas:2"), as the window body's relayout: what is not understood goes
    on as it is, for the validation to refuse in words."""
    relayout: dict[str, dict[str, Any]] = {}
    for term in text.replace(",", "\n").splitlines():
        node, _, layout = term.strip().partition("=")
        if not node:
            continue
        count = layout.strip().removeprefix("replicas:")
        if count != layout.strip():
            relayout[node.strip()] = {"replicas": int(count) if count.isdigit() else count}
        else:
            relayout[node.strip()] = {"mig_config": layout.strip()}
    return relayout


def allowance_form_data(post: Mapping[str, Any]) -> tuple[dict[str, int], dict[str, list[str]]]:
    """The allowance form's two whole numbers, and the errors of those that are not."""
    clean: dict[str, int] = {}
    errors: dict[str, list[str]] = {}
    for field, most in (("gpu_hours", MAX_ALLOWANCE_HOURS), ("max_days_ahead", MAX_DAYS_AHEAD)):
        text = (post.get(field) or "").strip()
        try:
            clean[field] = whole_number(text, low=0, high=most)
        except Refused as exc:
            errors[field] = [str(exc)]
    return clean, errors
