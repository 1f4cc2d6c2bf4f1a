from django.contrib.sessions.models import Session
from django.utils import timezone

from clusters.services import clusters_probe
from core.tasks import task
from kube.client import cluster_probe


@task(ignore_result=True)
def sessions_clear_expired() -> int:
    """Delete expired sessions (and the Keystone token ids they held) from the database."""
    deleted, _ = Session.objects.filter(expire_date__lt=timezone.now()).delete()
    return deleted


@task(ignore_result=True)
def cluster_probe_task() -> bool:
    """Ask every enabled cluster once and record each one's state (the home cluster's answer
    is also the pages' banner); whether the home cluster answered."""
    home = next((cluster for cluster in clusters_probe() if cluster.home), None)
    if home is None:  # no row for it (a database restored from before there were several)
        return cluster_probe() is None
    return home.state == home.State.READY
