from django.contrib.sessions.models import Session
from django.utils import timezone

from core.tasks import task
from kube.client import cluster_probe


@task(ignore_result=True)
def sessions_clear_expired() -> int:
    """Delete expired sessions (and the Keystone token ids they held) from the database."""
    deleted, _ = Session.objects.filter(expire_date__lt=timezone.now()).delete()
    return deleted


@task(ignore_result=True)
def cluster_probe_task() -> bool:
    """Ask the cluster once and record whether it answered (the pages' banner reads it)."""
    return cluster_probe() is None
