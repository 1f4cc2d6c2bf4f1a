"""The clusters' probe as a task: one cluster checked when an admin registers it (the beat
probes every cluster: portal.tasks.cluster_probe_task); the home cluster's MultiKueue objects
made to match the workers (at every change of a cluster, and the beat's sweep)."""

import logging

from core.tasks import send_on_commit, task
from kube.client import KubeError

from .dispatch import dispatch_reconcile
from .services import cluster_probe_one

log = logging.getLogger(__name__)


@task(ignore_result=True)
def cluster_probe_task(cluster_id: int) -> bool:
    """Probe one cluster and record its state; whether it answers."""
    cluster = cluster_probe_one(cluster_id=cluster_id)
    return cluster is not None and cluster.state == cluster.State.READY


@task(ignore_result=True)
def cluster_dispatch_task() -> bool:
    """The home cluster's MultiKueue objects for the workers (clusters/dispatch.py), then the
    tenants' queues dispatching to them; whether anything changed."""
    try:
        result = dispatch_reconcile()
    except KubeError as exc:  # the home cluster does not answer: the beat's next sweep
        log.info("MultiKueue objects not reconciled: %s", exc)
        return False
    if result is None:
        return False
    if result.made or result.removed:
        send_on_commit("tenants.tasks.tenants_reconcile_all")
    return bool(result.made or result.removed)
