"""GPU health: marking GPUs degraded or lost from what the exporters report, and back.

A GPU (a GpuDevice row; the scraper refreshes its last_* fields, this module owns `health*`):
- **degraded** when its last reported XID is a critical one (CRITICAL_XIDS, or the list in
  PORTAL_GPU_HEALTH_CRITICAL_XIDS) or it reports double-bit ECC errors (the volatile total,
  `DCGM_FI_DEV_ECC_DBE_VOL_TOTAL`, above 0: uncorrectable memory errors since the driver
  loaded; only a GPU reset clears it);
- **lost** when it has not been reported for PORTAL_GPU_HEALTH_LOST_SCRAPES scrape intervals
  while other GPUs were (so a scrape that fails as a whole, or a cluster that does not answer,
  never marks every GPU lost), and its node still exists in the cluster (a node removed on
  purpose takes its GPUs with it);
- **ok** again (recovery) when the fault is gone in a report made after the GPU was marked:
  the XID is no critical one, no double-bit ECC errors, and it is reported again.

Each transition is audited (`gpu.degraded`, `gpu.lost`, `gpu.recovered`, before → after).
Unhealthy GPUs are not "free": `unhealthy_gpus_by_node()` is subtracted from the nodes'
allocatable GPUs by `cluster.capacity` (which every free-GPU count of
the pages and the API goes through), without counting twice a GPU that the device plugin
already withdrew from allocatable (capacity − allocatable). Admins see the unhealthy GPUs in a
banner on every page (context_processors.gpu_alerts) and on the GPU dashboard.

With PORTAL_GPU_HEALTH_CORDON on, a node with an unhealthy GPU is cordoned through the API and
annotated `gpu-portal.io/cordoned-by: gpu-health` (audited `node.cordon`); when all its GPUs
are healthy again, a node the portal cordoned is uncordoned (`node.uncordon`). A node an admin
cordoned is never uncordoned by the portal, and one an admin uncordoned during an incident is
not cordoned again until that incident is over.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
from collections import defaultdict
from typing import Any

from django.conf import settings
from django.db.models import Max, QuerySet
from django.utils import timezone

from audit.services import audit_record
from calendars.cordons import node_cordon, node_uncordon
from kube.client import Kube, KubeError
from kube.labels import CORDON_ANNOTATION

from .models import GpuDevice

log = logging.getLogger(__name__)

# The XIDs after which a GPU should take no new work until an operator looks at it (NVIDIA's
# XID catalogue, "GPU Debug Guidelines"). Application XIDs (13, 31, 43, 45, 68, 109: a
# program's fault, the GPU is fine) are deliberately absent.
CRITICAL_XIDS: dict[int, str] = {
    48: "double-bit ECC error",
    63: "ECC page retirement or row remapping recorded",
    64: "ECC page retirement or row remapping failed",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    94: "contained ECC error",
    95: "uncontained ECC error",
}
CORDON_BY = "gpu-health"
UNHEALTHY = (GpuDevice.Health.DEGRADED, GpuDevice.Health.LOST)


def critical_xids() -> dict[int, str]:
    configured = list(settings.PORTAL_GPU_HEALTH_CRITICAL_XIDS or [])
    if not configured:
        return CRITICAL_XIDS
    return {xid: CRITICAL_XIDS.get(xid, "critical XID") for xid in configured}


def device_problem(device: GpuDevice) -> str:
    """Why the device's last report makes it degraded ("" when it does not)."""
    problems = []
    xids = critical_xids()
    if device.xid in xids:
        problems.append(f"XID {device.xid}: {xids[device.xid]}")
    if device.ecc_dbe > 0:
        problems.append(f"{device.ecc_dbe} double-bit ECC error{'s' if device.ecc_dbe != 1 else ''}")
    return "; ".join(problems)


def lost_after() -> dt.timedelta:
    return dt.timedelta(seconds=int(settings.PORTAL_GPU_HEALTH_LOST_SCRAPES)
                        * float(settings.PORTAL_USAGE_SCRAPE_INTERVAL))


# --- reads -----------------------------------------------------------------------------------

def unhealthy_devices() -> QuerySet[GpuDevice]:
    return GpuDevice.objects.filter(health__in=UNHEALTHY).select_related("last_workload")


def unhealthy_gpus_by_node() -> dict[str, int]:
    """Whole GPUs (not MIG instances) marked degraded or lost, per node name."""
    rows = (GpuDevice.objects.filter(health__in=UNHEALTHY, mig_instance="")
            .values_list("node").order_by())
    counts: dict[str, int] = defaultdict(int)
    for (node,) in rows:
        counts[node] += 1
    return dict(counts)


def node_cordoned_by_portal(node: dict[str, Any]) -> bool:
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    return annotations.get(CORDON_ANNOTATION) == CORDON_BY


# --- writes ----------------------------------------------------------------------------------

@dataclasses.dataclass
class HealthReport:
    devices: int = 0
    degraded: int = 0  # transitions into each state in this check
    lost: int = 0
    recovered: int = 0
    cordoned: list[str] = dataclasses.field(default_factory=list)
    uncordoned: list[str] = dataclasses.field(default_factory=list)
    skipped_lost_check: bool = False


def _transition(device: GpuDevice, health: str, reason: str, now: dt.datetime) -> None:
    before = {"health": device.health, "reason": device.health_reason}
    GpuDevice.objects.filter(pk=device.pk).update(health=health, health_reason=reason,
                                                  health_changed_at=now)
    action = "gpu.recovered" if health == GpuDevice.Health.OK else f"gpu.{health}"
    audit_record(actor=None, action=action, target=f"{device} {device.uuid}"[:255],
                 before=before, after={"health": health, "reason": reason,
                                       "xid": device.xid, "ecc_dbe": device.ecc_dbe})
    log.warning("GPU %s (%s) is %s: %s", device, device.uuid, health, reason or "healthy again")
    device.health, device.health_reason, device.health_changed_at = health, reason, now


def _nodes(kube: Kube) -> dict[str, dict[str, Any]] | None:
    """The nodes as the API server has them now, not the read model's copy: the check decides
    cordons from them, and must see the one it made a moment ago (one list per check)."""
    try:
        return {n["metadata"]["name"]: n for n in kube.list("Node")["items"]}
    except KubeError as exc:
        log.warning("GPU health: the cluster's nodes are unknown (%s)", exc)
        return None


def _cordon_nodes(kube: Kube, nodes: dict[str, dict[str, Any]],
                  devices: list[GpuDevice], report: HealthReport) -> None:
    unhealthy: dict[str, list[GpuDevice]] = defaultdict(list)
    for device in devices:
        if device.health in UNHEALTHY:
            unhealthy[device.node].append(device)
    for name, node in nodes.items():
        ours = node_cordoned_by_portal(node)
        cordoned = bool((node.get("spec") or {}).get("unschedulable"))
        try:
            if unhealthy.get(name) and settings.PORTAL_GPU_HEALTH_CORDON and not cordoned \
                    and not ours:
                reason = "; ".join(f"gpu{d.index}: {d.health_reason}" for d in unhealthy[name])
                node_cordon(kube=kube, node=node, by=CORDON_BY, reason=reason)
                report.cordoned.append(name)
            elif not unhealthy.get(name) and ours:
                node_uncordon(kube=kube, node=node, reason="its GPUs are healthy again")
                report.uncordoned.append(name)
        except KubeError as exc:
            log.warning("GPU health: node %s not (un)cordoned: %s", name, exc)


def gpu_health_check(*, now: dt.datetime | None = None, kube: Kube | None = None
                     ) -> HealthReport:
    """One pass over every GPU the exporters ever reported: mark, recover, (un)cordon."""
    now = now or timezone.now()
    kube = kube or Kube()
    report = HealthReport()
    devices = list(GpuDevice.objects.all())
    report.devices = len(devices)
    if not devices:
        return report
    cutoff = now - lost_after()
    freshest = GpuDevice.objects.aggregate(m=Max("last_seen"))["m"]
    scraping = freshest is not None and freshest >= cutoff
    missing = [d for d in devices if d.last_seen < cutoff]
    # one node list per check: which nodes exist, and which the portal cordoned (a node is
    # uncordoned in whichever later check finds the cluster answering)
    nodes = _nodes(kube)
    if missing and not scraping:
        report.skipped_lost_check = True
        log.warning("GPU health: no GPU reported since %s; lost GPUs are not judged", freshest)
    for device in devices:
        if device.last_seen < cutoff:
            if not scraping or (nodes is not None and device.node not in nodes):
                continue
            if device.health != GpuDevice.Health.LOST:
                _transition(device, GpuDevice.Health.LOST,
                            f"not reported since {device.last_seen:%Y-%m-%d %H:%M:%S %Z}", now)
                report.lost += 1
            continue
        problem = device_problem(device)
        if problem:
            if device.health != GpuDevice.Health.DEGRADED:
                _transition(device, GpuDevice.Health.DEGRADED, problem, now)
                report.degraded += 1
            elif device.health_reason != problem:  # another fault of a degraded GPU
                GpuDevice.objects.filter(pk=device.pk).update(health_reason=problem)
            continue
        fresh_report = device.health_changed_at is None or device.last_seen > \
            device.health_changed_at
        if device.health != GpuDevice.Health.OK and fresh_report:
            _transition(device, GpuDevice.Health.OK, "", now)
            report.recovered += 1
    if nodes is not None:
        _cordon_nodes(kube, nodes, devices, report)
    return report
