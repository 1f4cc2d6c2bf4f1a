"""The Celery application: launch/stop, provisioning, usage scraping, culling, lifecycle sync."""

import os

from celery import Celery
from celery.schedules import crontab

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

app = Celery("portal")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

# The tracker holds its watches open for most of each period: it gets a queue of its own, so
# launches and stops never wait behind it (run a worker with `-Q celery,tracker`, or one each).
app.conf.task_routes = {"portal.workloads.tasks.workloads_track": {"queue": "tracker"}}

app.conf.beat_schedule = {
    "workloads-requeue-stale": {"task": "portal.workloads.tasks.workloads_requeue_stale",
                                "schedule": 30.0},
    "workloads-enforce-runtime": {"task": "portal.workloads.tasks.workloads_enforce_runtime",
                                  "schedule": 30.0},
    "workloads-track": {"task": "portal.workloads.tasks.workloads_track", "schedule": 15.0,
                        "options": {"expires": 14.0}},
    "tenants-reconcile-all": {"task": "tenants.tasks.tenants_reconcile_all", "schedule": 300.0},
    "tenants-delete-due": {"task": "tenants.tasks.tenants_delete_due", "schedule": 60.0},
    "tenants-sync-keystone": {"task": "tenants.tasks.tenants_sync_keystone", "schedule": 600.0},
    "sessions-clear-expired": {
        "task": "portal.tasks.sessions_clear_expired",
        "schedule": crontab(minute=17),
    },
}
