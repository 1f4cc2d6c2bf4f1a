"""The one validation of calendar writes: the API's serializers and the pages' forms wrap it.

Each function takes what the caller sent as JSON types (the pages turn their fields into that
shape first) and answers clean fields, or raises ReservationInvalid / WindowInvalid with the
errors per field; nothing is written either way. Times are ISO 8601 with a zone (or datetimes
with one); what is stored is UTC.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from typing import Any

from django.utils import timezone

from catalogue.fields import invisible_characters_refusal
from catalogue.forms import label_key_error, label_value_error
from catalogue.layouts import MAX_REPLICAS, Target, target_units
from catalogue.models import GpuType
from cluster.capacity import cluster_nodes
from core.validation import FieldsInvalid, Refused, excerpt, moment
from kube.client import KubeError

from .models import WEEK, Reservation

MAX_RESERVATION = dt.timedelta(days=31)  # one occurrence
MAX_AHEAD = dt.timedelta(days=366)  # the furthest a reservation or window may start, or repeat to
MAX_WINDOW = dt.timedelta(days=14)
MAX_COUNT = 10_000
MAX_NODES = 500
PAST_SLACK = dt.timedelta(minutes=5)  # "now" as typed a moment ago
_NODE_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*",
                        re.ASCII)


class ReservationInvalid(FieldsInvalid):
    pass


class WindowInvalid(FieldsInvalid):
    pass


class _Refused(ValueError):
    pass


def _when(value: Any) -> dt.datetime:
    try:
        return moment(value).replace(microsecond=0)
    except Refused as exc:
        raise _Refused(str(exc)) from None


def _text(value: Any, field: str, *, required: bool, limit: int = 500) -> str:
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise _Refused("Text is required.")
    text = value.strip()
    if required and not text:
        raise _Refused("This field is required.")
    if len(text) > limit:
        raise _Refused(f"At most {limit} characters.")
    problem = invisible_characters_refusal(text, f"The {field}")
    if problem:
        raise _Refused(problem)
    return text


def _gpu_type(value: Any) -> GpuType:
    gpu_type = (GpuType.objects.filter(slug=value, enabled=True).first()
                if isinstance(value, str) else None)
    if gpu_type is None:
        slugs = ", ".join(GpuType.objects.filter(enabled=True).values_list("slug", flat=True))
        raise _Refused(f"No such GPU type; one of: {slugs}.")
    return gpu_type


def _run(errors: dict[str, list[str]], field: str, check: Any, value: Any) -> Any:
    try:
        return check(value)
    except _Refused as exc:
        errors.setdefault(field, []).append(str(exc))
        return None


def _times(errors: dict[str, list[str]], data: Mapping[str, Any], now: dt.datetime,
           longest: dt.timedelta) -> tuple[dt.datetime | None, dt.datetime | None]:
    start = _run(errors, "start", _when, data.get("start"))
    end = _run(errors, "end", _when, data.get("end"))
    if start is not None and end is not None:
        if end <= start:
            errors.setdefault("end", []).append("The end must come after the start.")
        elif end - start > longest:
            errors.setdefault("end", []).append(f"At most {longest.days} days from the start.")
        if end <= now:
            errors.setdefault("end", []).append("The end is in the past.")
    if start is not None and start > now + MAX_AHEAD:
        errors.setdefault("start", []).append(f"At most {MAX_AHEAD.days} days ahead.")
    return start, end


def reservation_clean(data: Mapping[str, Any], *, now: dt.datetime | None = None
                      ) -> dict[str, Any]:
    """{gpu_type, count, start, end, recurrence, until, note} → clean fields (the tenant is
    the caller's business: the view resolves it)."""
    now = now or timezone.now()
    errors: dict[str, list[str]] = {}
    known = {"tenant", "gpu_type", "count", "start", "end", "recurrence", "until", "note"}
    for field in sorted(set(data) - known):
        errors[field] = ["Unknown field."]
    gpu_type = _run(errors, "gpu_type", _gpu_type, data.get("gpu_type"))
    count = data.get("count")
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_COUNT:
        errors["count"] = [f"A whole number of GPUs from 1 to {MAX_COUNT}."]
    start, end = _times(errors, data, now, MAX_RESERVATION)
    if start is not None and start < now - PAST_SLACK:
        errors.setdefault("start", []).append("The start is in the past.")
    recurrence = data.get("recurrence") or ""
    until = None
    if recurrence not in Reservation.Recurrence.values:
        errors["recurrence"] = ["Empty (once) or “weekly”."]
    elif recurrence == Reservation.Recurrence.WEEKLY:
        if start is not None and end is not None and end - start > WEEK:
            errors.setdefault("end", []).append("A weekly reservation lasts at most a week.")
        until = _run(errors, "until", _when, data.get("until"))
        if until is not None and start is not None:
            if until <= start:
                errors.setdefault("until", []).append("It must come after the start.")
            elif until > now + MAX_AHEAD:
                errors.setdefault("until", []).append(f"At most {MAX_AHEAD.days} days ahead.")
    elif data.get("until") not in (None, ""):
        errors["until"] = ["Only a weekly reservation has an end of its repetition."]
    note = _run(errors, "note", lambda v: _text(v, "note", required=False), data.get("note"))
    if errors:
        raise ReservationInvalid(errors)
    return {"gpu_type": gpu_type, "count": count, "start": start, "end": end,
            "recurrence": recurrence, "until": until, "note": note}


def _node_names(value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _Refused("A list of node names is required.")
    names = sorted({v.strip() for v in value if v.strip()})
    if not names or len(names) > MAX_NODES:
        raise _Refused(f"From 1 to {MAX_NODES} node names.")
    bad = [n for n in names if len(n) > 253 or not _NODE_NAME.fullmatch(n)]
    if bad:
        raise _Refused(f"Not a node name: {', '.join(excerpt(n) for n in bad[:5])}.")
    return names


def _selector(value: Any) -> dict[str, str]:
    if isinstance(value, str):  # "key=value,key2=value2", as kubectl -l takes it
        pairs = [p.strip() for p in value.split(",") if p.strip()]
        value = {}
        for pair in pairs:
            key, eq, val = pair.partition("=")
            if not eq:
                raise _Refused(f"{excerpt(pair)}: only key=value terms are understood.")
            value[key.strip()] = val.strip()
    if not isinstance(value, dict) or not value or \
            not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise _Refused("A label selector is required: {\"key\": \"value\"} or \"key=value\".")
    for key, val in value.items():
        problem = label_key_error(key) or label_value_error(key, val)
        if problem:
            raise _Refused(problem)
    return dict(sorted(value.items()))


def window_clean(data: Mapping[str, Any], *, now: dt.datetime | None = None) -> dict[str, Any]:
    """{nodes | node_selector | gpu_type, start, end, reason, drain} → clean fields."""
    now = now or timezone.now()
    errors: dict[str, list[str]] = {}
    known = {"nodes", "node_selector", "gpu_type", "start", "end", "reason", "drain", "relayout"}
    for field in sorted(set(data) - known):
        errors[field] = ["Unknown field."]
    given = [f for f in ("nodes", "node_selector", "gpu_type") if data.get(f) not in (None, "", [], {})]
    nodes: list[str] = []
    selector: dict[str, str] = {}
    gpu_type = None
    if len(given) != 1:
        errors["nodes"] = ["Name what it covers: exactly one of nodes (names), node_selector "
                           "(labels) or gpu_type (every node of the type)."]
    elif given[0] == "nodes":
        nodes = _run(errors, "nodes", _node_names, data.get("nodes")) or []
    elif given[0] == "node_selector":
        selector = _run(errors, "node_selector", _selector, data.get("node_selector")) or {}
    else:
        gpu_type = _run(errors, "gpu_type", _gpu_type, data.get("gpu_type"))
    start, end = _times(errors, data, now, MAX_WINDOW)
    reason = _run(errors, "reason", lambda v: _text(v, "reason", required=True),
                  data.get("reason"))
    drain = data.get("drain", False)
    if not isinstance(drain, bool):
        errors["drain"] = ["true or false."]
    relayout: dict[str, dict[str, Any]] = {}
    if data.get("relayout") not in (None, {}, ""):
        relayout = _relayout(errors, data.get("relayout"), nodes, drain, nodes_given=given)
    if errors:
        raise WindowInvalid(errors)
    # a window may begin now (an urgent one), never before
    return {"nodes": nodes, "node_selector": selector, "gpu_type": gpu_type,
            "start": max(start, now) if start is not None else start, "end": end,
            "reason": reason, "drain": drain, "relayout": relayout}


def _target(value: Any) -> Target:
    if not isinstance(value, dict) or len(value) != 1 \
            or not set(value) <= {"mig_config", "replicas"}:
        raise _Refused("Give each node one of {\"mig_config\": \"all-2g.20gb\"} or "
                       "{\"replicas\": 2}.")
    if "mig_config" in value:
        config = value["mig_config"]
        if not isinstance(config, str) or not config.strip() or len(config) > 63:
            raise _Refused("mig_config names a MIG layout such as all-1g.10gb or all-disabled.")
        return Target(mig_config=config.strip())
    replicas = value["replicas"]
    if isinstance(replicas, bool) or not isinstance(replicas, int) \
            or not 1 <= replicas <= MAX_REPLICAS:
        raise _Refused(f"replicas is a whole number from 1 (no time-slicing) to {MAX_REPLICAS}.")
    return Target(replicas=replicas)


def _relayout(errors: dict[str, list[str]], value: Any, nodes: list[str], drain: Any, *,
              nodes_given: list[str]) -> dict[str, dict[str, Any]]:
    """{node: {"mig_config": …} | {"replicas": n}} → the same, each checked against what the
    node's GPUs can take as the cluster's read model has the node now."""
    def refuse(text: str) -> dict[str, dict[str, Any]]:
        errors.setdefault("relayout", []).append(text)
        return {}

    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        return refuse("An object {node name: layout} is required.")
    if nodes_given != ["nodes"]:
        return refuse("A re-layout names its nodes: give the window's nodes by name.")
    if drain is not True:
        return refuse("A re-layout needs drain: true (the MIG manager and the device plugin "
                      "act only on GPUs no pod holds).")
    outside = sorted(set(value) - set(nodes))
    if outside:
        return refuse(f"Not among the window's nodes: {', '.join(excerpt(n) for n in outside[:5])}.")
    try:
        cluster = {node["metadata"]["name"]: node for node in cluster_nodes()}
    except KubeError:
        return refuse("The cluster does not answer: what the nodes' GPUs can take cannot be "
                      "checked now. Try again in a moment.")
    clean: dict[str, dict[str, Any]] = {}
    for name in sorted(value):
        try:
            target = _target(value[name])
        except _Refused as exc:
            errors.setdefault("relayout", []).append(f"{name}: {exc}")
            continue
        node = cluster.get(name)
        if node is None:
            errors.setdefault("relayout", []).append(f"{name}: no such node in the cluster.")
            continue
        try:
            target_units(node, target)
        except ValueError as exc:
            text = str(exc)
            errors.setdefault("relayout", []).append(
                text if text.startswith(name) else f"{name}: {text}")
            continue
        clean[name] = target.as_json()
    return clean
