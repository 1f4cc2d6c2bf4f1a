from celery import shared_task
from django.contrib.sessions.models import Session
from django.utils import timezone


@shared_task(ignore_result=True)
def sessions_clear_expired() -> int:
    """Delete expired sessions (and the Keystone token ids they held) from the database."""
    deleted, _ = Session.objects.filter(expire_date__lt=timezone.now()).delete()
    return deleted
