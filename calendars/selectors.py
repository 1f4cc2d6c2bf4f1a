"""Reads of the calendar: which nodes a window covers, the bookings and windows of a GPU type as
intervals, what the cluster has of a type, and the calendar of a type (the page's, the API's).

The cluster part reads the cluster read model (cluster/), never the API server per request."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterable
from typing import Any

from django.db.models import Q, QuerySet

from catalogue.models import GpuType
from catalogue.sharing import DRA
from cluster.capacity import cluster_nodes, dra_node_devices, node_matches
from kube.labels import CORDON_ANNOTATION
from kube.quantity import parse_quantity

from .models import MaintenanceWindow, Reservation, ReservationOccurrence
from .timeline import Interval, Segment, segments

Obj = dict[str, Any]
# how far ahead a weekly reservation's occurrences are checked and shown (it may run on; the
# beat keeps acting on each as it comes)
HORIZON = dt.timedelta(days=366)
MAINTENANCE_CORDON_PREFIX = "maintenance-"


def node_gpus(node: Obj, gpu_type: GpuType) -> int:
    """The GPUs of `gpu_type` a node offers (0: not one of its nodes); a DRA type's, the
    devices the node publishes that its claims can be given (cluster/devices.py)."""
    if gpu_type.sharing == DRA:
        return dra_node_devices(gpu_type.slug, (node.get("metadata") or {}).get("name") or "")
    labels = (node.get("metadata") or {}).get("labels") or {}
    if not gpu_type.node_selector or not node_matches(labels, gpu_type.node_selector):
        return 0
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    return int(parse_quantity(allocatable.get(gpu_type.resource_name, "0")))


def cordoned_by_others(node: Obj) -> bool:
    """Cordoned by someone (an admin, the GPU health check), not by a maintenance window."""
    if not (node.get("spec") or {}).get("unschedulable"):
        return False
    by = ((node.get("metadata") or {}).get("annotations") or {}).get(CORDON_ANNOTATION, "")
    return not by.startswith(MAINTENANCE_CORDON_PREFIX)


def type_nodes(gpu_type: GpuType, nodes: Iterable[Obj] | None = None) -> dict[str, int]:
    """{node name: GPUs of the type} for the type's nodes in service: cordoned ones too when a
    maintenance window cordoned them (the window counts them down for its own time)."""
    nodes = cluster_nodes() if nodes is None else nodes
    found = {}
    for node in nodes:
        gpus = node_gpus(node, gpu_type)
        if gpus and not cordoned_by_others(node):
            found[node["metadata"]["name"]] = gpus
    return found


def type_capacity(gpu_type: GpuType, nodes: Iterable[Obj] | None = None) -> int:
    return sum(type_nodes(gpu_type, nodes).values())


def covers(window: MaintenanceWindow, node: Obj) -> bool:
    """Whether a window covers a node of the cluster (by name, label selector or GPU type)."""
    if window.nodes:
        return node["metadata"]["name"] in window.nodes
    if window.node_selector:
        return node_matches((node.get("metadata") or {}).get("labels") or {},
                            window.node_selector)
    return window.gpu_type is not None and node_gpus(node, window.gpu_type) > 0


def window_node_names(window: MaintenanceWindow, nodes: Iterable[Obj]) -> set[str]:
    """The names of the nodes a window covers now (`window_nodes` without what each offers:
    no query). Named nodes are kept even while absent from the cluster: those names are the
    answer, whatever the cluster has."""
    if window.nodes:
        return set(window.nodes)
    return {node["metadata"]["name"] for node in nodes if covers(window, node)}


def window_nodes(window: MaintenanceWindow, nodes: Iterable[Obj] | None = None,
                 gpu_types: Iterable[GpuType] | None = None) -> dict[str, dict[str, Any]]:
    """The nodes a window covers now: {name: {"gpu_type": slug or None, "gpus": n}}. Named
    nodes are kept even while absent from the cluster (0 GPUs)."""
    nodes = list(cluster_nodes() if nodes is None else nodes)
    types = list(GpuType.objects.all() if gpu_types is None else gpu_types)
    covered: dict[str, dict[str, Any]] = {}
    for node in nodes:
        if not covers(window, node):
            continue
        entry: dict[str, Any] = {"gpu_type": None, "gpus": 0}
        for gpu_type in types:
            gpus = node_gpus(node, gpu_type)
            if gpus:
                entry = {"gpu_type": gpu_type.slug, "gpus": gpus}
                break
        covered[node["metadata"]["name"]] = entry
    for name in window.nodes or []:
        covered.setdefault(name, {"gpu_type": None, "gpus": 0})
    return covered


def live_windows(now: dt.datetime) -> list[MaintenanceWindow]:
    """Windows announced or in progress and not over."""
    return list(MaintenanceWindow.objects.live().filter(
        state__in=(MaintenanceWindow.State.ANNOUNCED, MaintenanceWindow.State.ACTIVE),
        end__gt=now).select_related("gpu_type"))


def windows_between(since: dt.datetime, until: dt.datetime) -> list[MaintenanceWindow]:
    return list(MaintenanceWindow.objects.live().exclude(state=MaintenanceWindow.State.ENDED)
                .filter(start__lt=until, end__gt=since).select_related("gpu_type"))


def down_intervals(gpu_type: GpuType, since: dt.datetime, until: dt.datetime,
                   windows: Iterable[MaintenanceWindow] | None = None) -> list[Interval]:
    """The GPUs of the type the windows take out of service, as intervals."""
    windows = windows_between(since, until) if windows is None else windows
    out = []
    for window in windows:
        gpus = sum(entry["gpus"] for entry in (window.affected or {}).values()
                   if entry.get("gpu_type") == gpu_type.slug)
        if gpus:
            out.append(Interval(window.start, window.end, gpus,
                                f"maintenance #{window.pk}: {window.reason}"))
    return out


@dataclasses.dataclass(frozen=True)
class Occurrence:
    """One occurrence of a reservation as it books: until its end, or its release."""

    reservation: Reservation
    start: dt.datetime
    end: dt.datetime
    released: bool = False


def live_reservations(gpu_type: GpuType, since: dt.datetime, until: dt.datetime | None
                      ) -> QuerySet[Reservation]:
    """The live reservations of the type that may have an occurrence in [since, until) (None:
    from `since` on), with their tenant (their type is `gpu_type`: see `of_type`; their booker
    is rarely needed). Only a prefilter: `Reservation.occurrences` says which occurrences
    overlap, and says none for a reservation it leaves out (an occurrence lasts far less than
    HORIZON; a weekly reservation has an `until`)."""
    live = Reservation.objects.live().filter(gpu_type=gpu_type)
    if until is not None:
        live = live.filter(start__lt=until)
    return (live.filter(Q(recurrence="", end__gt=since)
                        | Q(recurrence=Reservation.Recurrence.WEEKLY, until__gt=since - HORIZON))
            .select_related("tenant"))


def of_type(reservations: list[Reservation], gpu_type: GpuType) -> list[Reservation]:
    """`reservations` (all of `gpu_type`) given that type's row rather than one each."""
    for reservation in reservations:
        reservation.gpu_type = gpu_type
    return reservations


# what an occurrence and its text need of a reservation ("lab's reservation of 4 a100")
BRIEF_FIELDS = ("tenant_id", "gpu_type_id", "count", "start", "end", "recurrence", "until",
                "tenant__name")


Span = tuple[Reservation, dt.datetime, dt.datetime]


def spans_of(reservations: Iterable[Reservation], since: dt.datetime, until: dt.datetime
             ) -> list[Span]:
    """(reservation, start, end) of every occurrence of `reservations` overlapping [since,
    until), as booked (releases not cut yet)."""
    return [(reservation, start, end) for reservation in reservations
            for start, end in reservation.occurrences(since, until)]


Released = dict[tuple[int, dt.datetime], dt.datetime]


def releases(occurrences: QuerySet[ReservationOccurrence]) -> Released:
    """{(reservation id, start): when it was released} of the released ones of
    `occurrences`."""
    return {(pk, start): at for pk, start, at in occurrences.filter(released_at__isnull=False)
            .values_list("reservation_id", "start", "released_at") if at is not None}


def occurrences_cut(spans: list[Span], released: Released, since: dt.datetime
                    ) -> list[Occurrence]:
    """`spans` as occurrences, in order of start (then reservation id): one released unused
    (`released`: {(reservation id, start): when}) books only until its release."""
    out = []
    for reservation, start, end in spans:
        cut = released.get((reservation.pk, start))
        if cut is not None:
            end = min(end, cut)
        if end > start and end > since:
            out.append(Occurrence(reservation, start, end, released=cut is not None))
    out.sort(key=lambda o: (o.start, o.reservation.pk))
    return out


def occurrences_between(gpu_type: GpuType, since: dt.datetime, until: dt.datetime, *,
                        exclude: int | None = None) -> list[Occurrence]:
    """Every live reservation occurrence of the type overlapping [since, until), in order of
    start; one released unused books only until its release. (The launch check's are
    cache.py's, from the calendar it holds.)"""
    live = live_reservations(gpu_type, since, until)
    if exclude is not None:
        live = live.exclude(pk=exclude)
    spans = spans_of(of_type(list(live), gpu_type), since, until)
    # the releases of the occurrences in the span only
    released = releases(ReservationOccurrence.objects.filter(
        reservation__in={r.pk for r, _, _ in spans})) if spans else {}
    return occurrences_cut(spans, released, since)


def next_occurrence(gpu_type: GpuType, after: dt.datetime, before: dt.datetime, *,
                    other_than_tenant: int | None = None) -> Occurrence | None:
    """The live reservation occurrence of the type that starts first in (after, before) (ties:
    the lower reservation id), of a tenant other than `other_than_tenant`; None: none does.
    The first one-off comes from the database (ordered, one row), each weekly one's next
    occurrence is computed (at most two per reservation): not every occurrence of a year
    (a launch check with no maximum runtime looks a year ahead). None is released: a release
    comes after an occurrence's start. (The launch check asks cache.py's first, for the
    days it holds.)"""
    live = live_reservations(gpu_type, after, before)
    if other_than_tenant is not None:
        live = live.exclude(tenant_id=other_than_tenant)
    found: list[tuple[dt.datetime, int, dt.datetime]] = []
    one_off = (live.filter(recurrence="", start__gt=after).order_by("start", "pk")
               .values_list("start", "pk", "end").first())
    if one_off is not None:
        found.append(one_off)
    for reservation in live.filter(recurrence=Reservation.Recurrence.WEEKLY).select_related(None) \
            .only("start", "end", "recurrence", "until"):
        for start, end in reservation.occurrences(after, before):
            if start > after:  # not the one running now
                found.append((start, reservation.pk, end))
                break
    if not found:
        return None
    start, pk, end = min(found)
    return Occurrence(of_type([live.get(pk=pk)], gpu_type)[0], start, end)


def booked_intervals(gpu_type: GpuType, since: dt.datetime, until: dt.datetime, *,
                     exclude: int | None = None, tenant_names: bool = True) -> list[Interval]:
    """The reservation occurrences of the type as intervals of GPUs booked."""
    return [Interval(o.start, o.end, o.reservation.count,
                     f"reservation #{o.reservation.pk} ({o.reservation.tenant.name})"
                     if tenant_names else f"reservation #{o.reservation.pk}")
            for o in occurrences_between(gpu_type, since, until, exclude=exclude)]


@dataclasses.dataclass(frozen=True)
class TypeCalendar:
    gpu_type: GpuType
    capacity: int
    since: dt.datetime
    until: dt.datetime
    segments: list[Segment]
    reservations: list[Interval]
    windows: list[Interval]


def type_calendar(gpu_type: GpuType, since: dt.datetime, until: dt.datetime, *,
                  tenant_names: bool = True, nodes: Iterable[Obj] | None = None) -> TypeCalendar:
    """A GPU type's calendar over [since, until): its capacity, what is reserved and what is in
    maintenance, cut where anything changes."""
    booked = booked_intervals(gpu_type, since, until, tenant_names=tenant_names)
    down = down_intervals(gpu_type, since, until)
    return TypeCalendar(gpu_type, type_capacity(gpu_type, nodes), since, until,
                        segments(since, until, booked, down), booked, down)


def calendar_data(gpu_type: GpuType, since: dt.datetime, until: dt.datetime, *,
                  shows: Any = None, nodes: Iterable[Obj] | None = None) -> dict[str, Any]:
    """A type's calendar as plain data (the API's GET calendar/, the page's chart). `shows`:
    whether the viewer may see a reservation's tenant and note (a callable on the
    reservation); others' bookings appear as GPUs reserved, nameless."""
    occurrences = occurrences_between(gpu_type, since, until)
    windows = [w for w in windows_between(since, until)]
    down = down_intervals(gpu_type, since, until, windows)
    capacity = type_capacity(gpu_type, nodes)
    booked = [Interval(o.start, o.end, o.reservation.count) for o in occurrences]
    entries = []
    for o in occurrences:
        visible = shows is None or shows(o.reservation)
        entries.append({"id": o.reservation.pk if visible else None,
                        "tenant": o.reservation.tenant.name if visible else None,
                        "count": o.reservation.count, "start": o.start, "end": o.end,
                        "note": o.reservation.note if visible else "", "released": o.released})
    window_rows = []
    for window in windows:
        gpus = sum(e["gpus"] for e in (window.affected or {}).values()
                   if e.get("gpu_type") == gpu_type.slug)
        if gpus or window.gpu_type_id == gpu_type.pk:
            window_rows.append({"id": window.pk, "start": window.start, "end": window.end,
                                "gpus": gpus, "reason": window.reason,
                                "covers": window.target_text})
    return {"gpu_type": gpu_type.slug, "capacity": capacity, "since": since, "until": until,
            "segments": [{"start": s.start, "end": s.end, "reserved": s.booked,
                          "maintenance": s.down, "bookable": max(s.left(capacity), 0)}
                         for s in segments(since, until, booked, down)],
            "reservations": entries, "windows": window_rows}
