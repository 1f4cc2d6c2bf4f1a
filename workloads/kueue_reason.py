"""Why Kueue holds a workload, in the portal's words where it can say it better and Kueue's own
text otherwise, never naming another tenant.

Kueue says why on its Workload (the QuotaReserved condition False with a message, Evicted with
its reason, PodsReady) and in the events it writes on it, which the tracker already records
(tracking/events.py): "Pending" with the scheduler's message, "Preempted", "Evicted",
"Requeued". Its text can name ClusterQueues (a tenant's ClusterQueue is named as its
namespace), cohorts (the site's, a department's) and the preemptor's path through them, and
the uids of other tenants' Workloads and Jobs: `redact` keeps only what the tenant may see.
Pure: dicts and strings in, strings out.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from tenants.kueue import COHORT

# Kueue's reasons of the events and conditions that say why a workload waits or went back
WAITING = {"Pending", "SecondPassFailed", "Preempted", "Evicted", "Requeued",
           "AdmissionCheckRejected"}
# ... and those that say it no longer waits for quota
PASSED = {"QuotaReserved", "Admitted"}

_UIDS = re.compile(r"\s*\(UID: [^)]*\)")
_PREEMPTED_WORKLOAD = re.compile(r"\bPreempted workload \S+")
_PATHS = re.compile(r";\s*preemptor path: [^;]*(?:;\s*preemptee path: [^;]*)?")
_CLUSTER_QUEUE = re.compile(r"\bClusterQueue (\S+?)(?=[\s,.;:)]|$)")
_COHORT = re.compile(r"\b([Cc])ohort (\S+?)(?=[\s,.;:)]|$)")
_NAMED_PATH = re.compile(r"(?<![\w.-])/[\w.-]+(?:/[\w.-]+)+")
_SHORT = re.compile(
    r"insufficient unused quota for (?P<resource>\S+) in flavor (?P<flavor>\S+?), "
    r"(?P<more>\S+) more needed")
_OVER_MAX = re.compile(
    r"insufficient quota for (?P<resource>\S+) in flavor (?P<flavor>\S+?), "
    r"(?:request|previously considered podsets requests) .*?> maximum capacity")
_BORROW = re.compile(r"borrowing limit for (?P<resource>\S+) in flavor (?P<flavor>\S+?) exceeded")
_UNMAPPED = re.compile(r"DeviceClass (?P<cls>\S+) is not mapped")
_PREEMPTED_BY = re.compile(r"due to (?P<why>[^;]+)")
_PREEMPTOR_PRIORITY = re.compile(r"preemptor effective priority: (?P<priority>-?\d+)")


@dataclasses.dataclass(frozen=True)
class KueueReason:
    reason: str   # the portal's words
    message: str  # Kueue's own text, redacted


def redact(message: str, own_queues: frozenset[str] = frozenset()) -> str:
    """Kueue's text with what names other tenants taken out: the uids of the preemptor's
    Workload and Job, the preemptor's and preemptee's paths through the cohorts, and every
    ClusterQueue or cohort but the tenant's own queues (`own_queues`) and the site's cohort."""
    text = _PATHS.sub("", _UIDS.sub("", message))
    text = _PREEMPTED_WORKLOAD.sub("Preempted a workload", text)

    def queue(match: re.Match[str]) -> str:
        return match.group(0) if match.group(1) in own_queues else "ClusterQueue of another project"

    def cohort(match: re.Match[str]) -> str:
        return match.group(0) if match.group(2) == COHORT else f"{match.group(1)}ohort of a department"

    text = _COHORT.sub(cohort, _CLUSTER_QUEUE.sub(queue, text))
    return _NAMED_PATH.sub("(a path through the cohorts)", text).strip()


def _gpu(flavor: str) -> str:
    return flavor.removeprefix("gpu-")


def explain(reason: str, message: str) -> str:
    """The portal's words for one of Kueue's reasons and its (redacted) message; Kueue's text
    where the portal has none better."""
    # Kueue's eviction events are "Evicted" + "DueTo" + the cause (EvictedDueToPreempted,
    # EvictedDueToPodsReadyTimeout); its preemptor writes "Preempted" with the priorities
    if reason == "Preempted" or (reason.startswith("Evicted")
                                 and ("Preempted" in reason or "Preempted" in message)):
        why = _PREEMPTED_BY.search(message)
        cause = (why.group("why").strip() if why else "").lower()
        priority = _PREEMPTOR_PRIORITY.search(message)
        by = f" (priority {priority.group('priority')})" if priority else ""
        if "reclamation" in cause:
            return (f"Preempted: the GPUs it borrowed were taken back for a workload{by} of the "
                    "project that lent them; it waits in the queue again.")
        if "fair sharing" in cause:
            return (f"Preempted by fair sharing: another project's workload{by} had its turn "
                    "at the GPUs; it waits in the queue again.")
        if "clusterqueue" in cause:
            return (f"Preempted by a workload of higher priority{by} in this project's queue; "
                    "it waits in the queue again.")
        return f"Preempted by a workload{by}; it waits in the queue again."
    if (reason.startswith("Evicted") or reason == "Requeued") and "PodsReady" in message:
        return ("Requeued: its pods were not ready in time, so Kueue gave its GPUs back and "
                "queued it again.")
    short = _SHORT.search(message)
    if short:
        return (f"Waiting for {short.group('more')} more {_gpu(short.group('flavor'))} "
                f"{short.group('resource')}: the project's quota and what it may borrow are "
                "in use.")
    over = _OVER_MAX.search(message)
    if over:
        return (f"It asks for more {_gpu(over.group('flavor'))} than the project's queue can "
                "ever hold (its quota and borrowing limit).")
    borrow = _BORROW.search(message)
    if borrow:
        return (f"Waiting: borrowing more {_gpu(borrow.group('flavor'))} would pass the "
                "project's or its department's borrowing cap.")
    unmapped = _UNMAPPED.search(message)
    if unmapped:
        return (f"Kueue cannot count its GPUs: the device class {unmapped.group('cls')} is not "
                "mapped in Kueue's DRA configuration; an administrator must add it.")
    if "admission check" in message.lower() or reason == "AdmissionCheckRejected":
        return f"Waiting for an admission check: {message}"
    if "is inactive" in message or "is stopped" in message:
        return "The project's queue admits nothing now (held or being changed)."
    return message


def _condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition.get("type") == kind:
            return dict(condition)
    return None


def from_workload(kueue_workload: dict[str, Any],
                  own_queues: frozenset[str] = frozenset()) -> KueueReason | None:
    """Why a Kueue Workload waits, from its conditions: the latest eviction (preempted, pods not
    ready in time) while it has not got quota back, else QuotaReserved False's message; None
    when it holds quota or Kueue has said nothing yet."""
    reserved = _condition(kueue_workload, "QuotaReserved")
    if reserved and reserved.get("status") == "True":
        return None
    evicted = _condition(kueue_workload, "Evicted")
    if evicted and evicted.get("status") == "True":
        message = redact(evicted.get("message") or "", own_queues)
        kind = "Preempted" if evicted.get("reason") == "Preempted" else "Evicted"
        text = f"{evicted.get('reason', '')}: {message}" if kind == "Evicted" else message
        return KueueReason(explain(kind, text), message)
    if reserved and reserved.get("message"):
        message = redact(reserved["message"], own_queues)
        return KueueReason(explain(reserved.get("reason") or "Pending", message), message)
    return None


def waits(reason: str) -> bool:
    """Whether one of Kueue's event reasons says the workload waits (or went back to wait)."""
    return reason in WAITING or reason.startswith("Evicted")


def from_event(reason: str, message: str,
               own_queues: frozenset[str] = frozenset()) -> KueueReason | None:
    """Why it waits, from one of Kueue's events on its Workload (tracked as the workload's
    events); None when that event says it no longer waits for quota."""
    if not waits(reason):
        return None
    redacted = redact(message, own_queues)
    return KueueReason(explain(reason, redacted), redacted)


def from_events(events: list[tuple[str, str]],
                own_queues: frozenset[str] = frozenset()) -> KueueReason | None:
    """Why it waits, from Kueue's events on its Workload (reason, message), oldest first: the
    last one; where it went back to the queue since it last got quota (preempted, its pods not
    ready in time), that first, then what it waits for now."""
    since: list[tuple[str, str]] = []
    for reason, message in events:
        since = [] if reason in PASSED else [*since, (reason, message)]
    if not since:
        return None

    def went_back(reason: str) -> bool:
        return reason == "Preempted" or reason.startswith("Evicted")

    waiting = [(r, m) for r, m in since if not went_back(r)]
    now = from_event(*waiting[-1], own_queues) if waiting else None
    # the preemptor's own event first: it says by what priority
    back = next((from_event(r, m, own_queues) for r, m in reversed(since) if r == "Preempted"),
                None) or next((from_event(r, m, own_queues) for r, m in reversed(since)
                               if went_back(r)), None)
    if now is None or back is None:
        return now or back
    return KueueReason(f"{back.reason} {now.reason}", now.message)
