"""The clusters' probe as a task: one cluster checked when an admin registers it (the beat
probes every cluster: portal.tasks.cluster_probe_task)."""

from core.tasks import task

from .services import cluster_probe_one


@task(ignore_result=True)
def cluster_probe_task(cluster_id: int) -> bool:
    """Probe one cluster and record its state; whether it answers."""
    cluster = cluster_probe_one(cluster_id=cluster_id)
    return cluster is not None and cluster.state == cluster.State.READY
