"""The GPU portal's Django project and its workload domain."""

from .celery import app as celery_app

__all__ = ["celery_app"]
