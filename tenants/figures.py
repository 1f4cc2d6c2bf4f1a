"""A tenant's quota figures, worked out in one place: what the admin set (nominal), what is
adjusted now (QuotaAdjustment rows: reservations, maintenance, a budget's hold, grants), what is
in force, and what is used and where that was read.

Pure: tenants.selectors.quota_figures reads the rows and calls `figures_of`. Every reader of a
quota takes its figures from there — the portal's admission and its refusals, Kueue's
ClusterQueue, the namespace's ResourceQuota, the calendars, budgets, the pages, the API and
gpuctl — so that no two of them can count differently.

Per GPU type the figures count units (a unit of a shared type is a part of a GPU: a replica of a
time-sliced GPU, a MIG slice); the total counts GPU-equivalents, units × the type's part of a
GPU (`fractions`, exact), so that four quarter-T4s weigh one GPU in the total, and what a tenant
uses in all is compared with its total in those terms.

In force, per GPU type: nominal + GPUs added − GPUs withheld, never below 0. GPUs added come with
CPU and memory: the quota's own share per GPU (its cores and GiB over its GPUs in all; for a
quota of no GPUs, the default quota's share), rounded up — added GPUs that could not be used for
want of CPU or memory would be held for nothing. Withheld GPUs (maintenance) lower their type
only: the tenant may still use its total on other types. A hold in force holds the queue (Kueue
admits nothing new; what runs runs on).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

from django.utils import timezone

from catalogue.sharing import equivalents_text

# where a figure of use was read
USE_ADMISSION = "admission"  # the portal's active workloads, as its admission counts them
USE_CLUSTER = "cluster"  # the GPUs the namespace's pods request (cluster.capacity)

# how a GPU added by each source reads in a refusal ("4 of them reserved")
ADDED_WORDS = {"reservation": "reserved", "admin": "granted by an admin",
               "request": "granted on request"}


def _utc(at: dt.datetime | None) -> str | None:
    return at.astimezone(dt.UTC).isoformat() if at is not None else None


def _when(at: dt.datetime) -> str:
    return f"{timezone.localtime(at, dt.UTC):%Y-%m-%d %H:%M} UTC"


@dataclasses.dataclass(frozen=True)
class AdjustmentLine:
    """One QuotaAdjustment as the figures count it."""

    source: str  # QuotaAdjustment.Source
    gpu_type: str | None = None  # slug; None: of the total (a delta) or a hold
    gpus: int = 0  # a delta's GPUs: > 0 added, < 0 withheld
    kind: str = "delta"  # QuotaAdjustment.Kind: "delta" or "hold"
    reason: str = ""
    ref: str = ""
    starts_at: dt.datetime | None = None
    ends_at: dt.datetime | None = None

    @property
    def hold(self) -> bool:
        return self.kind == "hold"

    def in_force(self, now: dt.datetime) -> bool:
        """Until its end (none: until its writer removes it). Its start is when its writer
        found it began (writers write no adjustment ahead of it): only the end is the readers'
        to honour, so that an adjustment whose writer is late or gone ends all the same."""
        return self.ends_at is None or now < self.ends_at

    @property
    def words(self) -> str:
        """What it does, in words: "reserved", "withheld for maintenance", "queue held"."""
        if self.hold:
            return "queue held"
        if self.gpus < 0:
            return "withheld for maintenance" if self.source == "maintenance" else "withheld"
        return ADDED_WORDS.get(self.source, "added")

    @property
    def text(self) -> str:
        """"+4 a100 reserved until 2030-03-04 11:00 UTC: reservation #7 (4 a100)", "queue held
        until …: GPU-hour budget: used up": the line as the pages, the API and gpuctl say it."""
        what = self.words if self.hold else \
            f"{self.gpus:+d} {self.gpu_type or 'GPUs in all'} {self.words}"
        until = f" until {_when(self.ends_at)}" if self.ends_at is not None else ""
        return f"{what}{until}" + (f": {self.reason}" if self.reason else "")

    def as_data(self) -> dict[str, Any]:
        """As plain data: what the API answers, the audit trail keeps and the writer compares
        (times in UTC, as the database gives them back)."""
        return {"source": self.source, "kind": self.kind, "gpu_type": self.gpu_type,
                "gpus": self.gpus, "reason": self.reason, "ref": self.ref,
                "starts_at": _utc(self.starts_at), "ends_at": _utc(self.ends_at)}


@dataclasses.dataclass(frozen=True)
class QuotaAmounts:
    """GPUs per type and in all, CPU cores, memory GiB: the nominal quota or the one in force."""

    gpus_by_type: dict[str, int]
    gpus_total: int
    cpu: int
    memory_gb: int
    # volumes: GiB their claims ask for in all, and how many (no adjustment changes these)
    storage_gib: int = 0
    volumes: int = 0

    def gpus(self, slug: str) -> int:
        return self.gpus_by_type.get(slug, 0)

    def as_data(self) -> dict[str, Any]:
        """The API's shape (memory as `memory`, in GiB, as the quota's own field)."""
        return {"gpus_by_type": dict(sorted(self.gpus_by_type.items())),
                "gpus_total": self.gpus_total, "cpu": self.cpu, "memory": self.memory_gb,
                "storage_gib": self.storage_gib, "volumes": self.volumes}


@dataclasses.dataclass(frozen=True)
class QuotaUse:
    """What a tenant uses of its quota, and where that was read (`source`: USE_ADMISSION, the
    portal's rows; USE_CLUSTER, the namespace's pods, GPUs only: None for what it cannot
    say)."""

    source: str
    gpus_by_type: dict[str, int]  # units
    cpu: int | None = None
    memory_gb: int | None = None
    workloads: int | None = None
    # the part of a GPU a unit of each type is (quota_figures fills it in; absent: 1)
    fractions: Mapping[str, Fraction] = dataclasses.field(default_factory=dict)

    @property
    def gpus_total(self) -> Fraction:
        """GPU-equivalents in use: units × the type's part of a GPU, summed."""
        return sum((units * self.fractions.get(slug, Fraction(1))
                    for slug, units in self.gpus_by_type.items()), Fraction(0))

    def gpus(self, slug: str) -> int:
        return self.gpus_by_type.get(slug, 0)


@dataclasses.dataclass(frozen=True)
class QuotaFigures:
    """A tenant's quota now: nominal, the adjustments in force, in force, and (when asked for)
    used."""

    tenant_name: str
    nominal: QuotaAmounts
    in_force: QuotaAmounts
    adjustments: tuple[AdjustmentLine, ...]  # those in force now
    max_workloads: int
    max_runtime_minutes: int
    borrowing_limit: int | None  # Kueue: GPUs of each type it may borrow (None: no limit)
    used: QuotaUse | None = None
    # the part of a GPU a unit of each type the quota names is (absent: 1, a whole GPU)
    fractions: Mapping[str, Fraction] = dataclasses.field(default_factory=dict)

    def fraction(self, slug: str) -> Fraction:
        return self.fractions.get(slug, Fraction(1))

    def equivalents(self, slug: str, units: int) -> Fraction:
        """GPU-equivalents of `units` of a type: what a request weighs against the total."""
        return units * self.fraction(slug)

    @property
    def holds(self) -> tuple[AdjustmentLine, ...]:
        return tuple(line for line in self.adjustments if line.hold)

    @property
    def held(self) -> bool:
        """Whether the tenant's queue is held (Kueue admits nothing new)."""
        return bool(self.holds)

    @property
    def held_reason(self) -> str:
        return "; ".join(line.reason or f"held by {line.source}" for line in self.holds)

    def held_by(self, source: str) -> bool:
        return any(line.source == source for line in self.holds)

    def gpus(self, slug: str) -> int:
        """GPUs of the type in force now."""
        return self.in_force.gpus(slug)

    def added(self, slug: str) -> int:
        return sum(line.gpus for line in self._deltas(slug) if line.gpus > 0)

    def withheld(self, slug: str) -> int:
        return -sum(line.gpus for line in self._deltas(slug) if line.gpus < 0)

    def before_withheld(self, slug: str) -> int:
        """The type's GPUs with what is added and nothing withheld: what maintenance shares
        its withholding by (it cannot count what it withholds itself)."""
        return self.nominal.gpus(slug) + self.added(slug)

    def withheld_until(self, slug: str) -> dt.datetime | None:
        ends = [line.ends_at for line in self._deltas(slug) if line.gpus < 0]
        known = [end for end in ends if end is not None]
        return max(known) if known and len(known) == len(ends) else None

    def reach(self, slug: str) -> int | None:
        """The most GPUs of a type the tenant's Kueue queue can hold at once now: in force
        plus what it may borrow (None: no borrowing limit, only the cluster's size bounds it)."""
        if self.borrowing_limit is None:
            return None
        return self.gpus(slug) + self.borrowing_limit

    def adjusted_text(self, slug: str) -> str:
        """" (4 of them reserved; 2 withheld for maintenance until …)" while adjustments
        change the type's GPUs, else ""."""
        parts = []
        by_source: dict[str, int] = {}
        for line in self._deltas(slug):
            if line.gpus > 0:
                by_source[line.source] = by_source.get(line.source, 0) + line.gpus
        for source, gpus in sorted(by_source.items()):
            parts.append(f"{gpus} of them {ADDED_WORDS.get(source, 'added')}")
        withheld = self.withheld(slug)
        if withheld:
            until = self.withheld_until(slug)
            parts.append(f"{withheld} withheld for maintenance"
                         + (f" until {_when(until)}" if until else ""))
        return f" ({'; '.join(parts)})" if parts else ""

    def in_force_text(self, slug: str) -> str:
        """"4 a100 nominal, +4 reserved until 2030-03-04 11:00 UTC → 8 in force" while
        adjustments change the type's GPUs, else ""."""
        deltas = self._deltas(slug)
        if not deltas:
            return ""
        changes = ", ".join(
            f"{line.gpus:+d} {line.words}"
            + (f" until {_when(line.ends_at)}" if line.ends_at is not None else "")
            for line in deltas)
        return f"{self.nominal.gpus(slug)} {slug} nominal, {changes} → {self.gpus(slug)} in force"

    def total_text(self) -> str:
        """"8 GPUs in all nominal, +4 → 12 in force" while the total differs, else ""."""
        nominal, in_force = self.nominal.gpus_total, self.in_force.gpus_total
        if nominal == in_force:
            return ""
        return f"{nominal} GPUs in all nominal, {in_force - nominal:+d} → {in_force} in force"

    def text(self) -> str:
        """Everything that differs from the quota as set, one part per GPU type adjusted, the
        total, the queue's hold: "" when nothing adjusts the quota."""
        parts = [self.in_force_text(slug) for slug in sorted(
            {line.gpu_type for line in self.adjustments if line.gpu_type is not None})]
        parts.append(self.total_text())
        if self.held:
            parts.append(f"queue held: {self.held_reason}")
        return "; ".join(part for part in parts if part)

    def as_data(self) -> dict[str, Any]:
        """What the quota API adds to the quota: read only, with the texts the pages show."""
        return {"in_force": {**self.in_force.as_data(), "held": self.held,
                             "held_reason": self.held_reason, "text": self.text(),
                             "gpus_by_type_text": {
                                 slug: text for slug in sorted(self.in_force.gpus_by_type)
                                 if (text := self.in_force_text(slug))}},
                "adjustments": [{**line.as_data(), "text": line.text}
                                for line in self.adjustments]}

    def _deltas(self, slug: str) -> list[AdjustmentLine]:
        return [line for line in self.adjustments if not line.hold and line.gpu_type == slug]


def figures_of(*, tenant_name: str, nominal: QuotaAmounts, lines: Iterable[AdjustmentLine],
               now: dt.datetime, default_share: tuple[float, float], max_workloads: int,
               max_runtime_minutes: int, borrowing_limit: int | None,
               used: QuotaUse | None = None,
               fractions: Mapping[str, Fraction] | None = None) -> QuotaFigures:
    """The figures in force at `now` (see the module's text). `default_share`: CPU cores and
    memory GiB per GPU of the default quota, for a quota of no GPUs. `fractions`: the part of
    a GPU a unit of each type is (absent: 1), given to `used` too."""
    fractions = dict(fractions or {})
    if used is not None:
        used = dataclasses.replace(used, fractions={**used.fractions, **fractions})
    lines = tuple(line for line in lines if line.in_force(now))
    by_type = dict(nominal.gpus_by_type)
    added_total = withheld_total = 0
    for line in lines:
        if line.hold:
            continue
        if line.gpu_type is None:
            if line.gpus > 0:
                added_total += line.gpus
            else:
                withheld_total -= line.gpus
            continue
        by_type[line.gpu_type] = by_type.get(line.gpu_type, 0) + line.gpus
        if line.gpus > 0:
            added_total += line.gpus
    by_type = {slug: max(gpus, 0) for slug, gpus in by_type.items()}
    cpu, memory_gb = nominal.cpu, nominal.memory_gb
    if added_total:
        if nominal.gpus_total:
            per_cpu = nominal.cpu / nominal.gpus_total
            per_memory = nominal.memory_gb / nominal.gpus_total
        else:
            per_cpu, per_memory = default_share
        cpu += math.ceil(per_cpu * added_total)
        memory_gb += math.ceil(per_memory * added_total)
    in_force = QuotaAmounts(
        gpus_by_type=by_type,
        gpus_total=max(nominal.gpus_total + added_total - withheld_total, 0),
        cpu=cpu, memory_gb=memory_gb, storage_gib=nominal.storage_gib, volumes=nominal.volumes)
    return QuotaFigures(tenant_name=tenant_name, nominal=nominal, in_force=in_force,
                        adjustments=lines, max_workloads=max_workloads,
                        max_runtime_minutes=max_runtime_minutes,
                        borrowing_limit=borrowing_limit, used=used, fractions=fractions)


@dataclasses.dataclass(frozen=True)
class DepartmentCaps:
    """What a department's projects may hold together: GPU-equivalents in all and units of
    each GPU type (None, or a type absent: no cap of that kind)."""

    name: str
    gpus_total: int | None
    gpus_by_type: Mapping[str, int]
    # the part of a GPU a unit of each type is (absent: 1, a whole GPU)
    fractions: Mapping[str, Fraction] = dataclasses.field(default_factory=dict)

    @property
    def capped(self) -> bool:
        return self.gpus_total is not None or bool(self.gpus_by_type)

    def fraction(self, slug: str) -> Fraction:
        return self.fractions.get(slug, Fraction(1))

    def type_cap(self, slug: str) -> int | None:
        """The units of a type the projects may hold together: the type's own cap, and no more
        than the cap in all leaves room for (what Kueue's Cohort holds: it counts per type)."""
        caps = [self.gpus_by_type[slug]] if slug in self.gpus_by_type else []
        if self.gpus_total is not None:
            caps.append(math.floor(self.gpus_total / self.fraction(slug)))
        return min(caps) if caps else None

    def as_data(self) -> dict[str, Any]:
        return {"gpus_total": self.gpus_total,
                "gpus_by_type": dict(sorted(self.gpus_by_type.items()))}


def _figure(value: Fraction) -> float:
    """GPU-equivalents as the API gives them: a number, two places at most."""
    return round(float(value), 2)


@dataclasses.dataclass(frozen=True)
class DepartmentStanding:
    """What a department's projects use now against its caps: `used` as the portal's
    admission counts it (the same reader that refuses a launch past a cap), their quotas in
    force together, the caps and what is left of them."""

    caps: DepartmentCaps
    used: QuotaUse
    quotas_by_type: Mapping[str, int]  # units of each type, their quotas in force together
    quotas_total: int  # GPU-equivalents, their quotas' totals in force together
    gpu_types: tuple[str, ...]  # the slugs shown: every known type

    def type_rows(self) -> list[dict[str, Any]]:
        """Per GPU type: units used, the projects' quotas, the cap (None: none) and what is
        left of it (never below 0: a cap lowered under what runs leaves nothing)."""
        rows = []
        for slug in self.gpu_types:
            cap = self.caps.type_cap(slug)
            used = self.used.gpus(slug)
            rows.append({"gpu_type": slug, "used": used, "quotas": self.quotas_by_type.get(slug, 0),
                         "cap": cap, "left": None if cap is None else max(cap - used, 0)})
        return rows

    def total(self) -> dict[str, Any]:
        """In all, in GPU-equivalents (a unit of a shared type weighs its part of a GPU)."""
        used, cap = self.used.gpus_total, self.caps.gpus_total
        left = None if cap is None else max(cap - used, Fraction(0))
        return {"used": _figure(used), "used_text": equivalents_text(used),
                "quotas": self.quotas_total, "cap": cap,
                "left": None if left is None else _figure(left),
                "left_text": "" if left is None else equivalents_text(left)}

    def as_data(self) -> dict[str, Any]:
        return {"gpus_by_type": self.type_rows(), "gpus_total": self.total(),
                "workloads": self.used.workloads or 0}
