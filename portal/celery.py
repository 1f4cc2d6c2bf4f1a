"""The Celery application: launch/stop, provisioning, usage scraping, culling, lifecycle sync."""

import logging
import os
from typing import Any

from celery import Celery, Task, signals
from celery.schedules import crontab
from kombu import Exchange, Queue

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

app = Celery("portal")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

log = logging.getLogger(__name__)


# Celery's Django fix-up closes the database connections before and after every task unless
# CELERY_DB_REUSE_MAX is set, so each task would open a new PostgreSQL connection (TCP,
# authentication, a server process forked for it): most of a launch's time in the worker. With
# it set (settings.py), connections live as they do in the web process, by CONN_MAX_AGE and
# CONN_HEALTH_CHECKS, checked around each task as Django does around each request.
def _close_old_connections(sender: object = None, task: Task | None = None, **kwargs: Any) -> None:
    if task is not None and getattr(task.request, "is_eager", False):
        return  # an eager task runs inside the caller's request or test transaction
    from django.db import close_old_connections

    close_old_connections()


signals.task_prerun.connect(_close_old_connections)
signals.task_postrun.connect(_close_old_connections)

# The lifecycle tracker is no task: it is a long-lived process of its own (`manage.py
# track_workloads`, leader-elected through a Redis lease), so it has no beat entry and no queue.
# What waits on the outside world that users choose (their webhook receivers, the mail server)
# runs on a queue of its own, `notifications`, served by workers of its own (the demo's
# `notifications-worker`, deploy/'s gpu-portal-notifications-worker): a receiver that hangs or
# a burst of tests holds those workers, never a launch, a stop or a provisioning.
NOTIFICATIONS_QUEUE = "notifications"
# A workload's cluster I/O — its objects created (a launch), deleted (a stop, a removal, a
# finished job's address given back) — runs on `launches`, served by workers with a pool of
# threads (the demo's `launch-worker`, deploy/'s gpu-portal-launch-worker): such a task is
# mostly waiting on the API server, so one process carries many at once, and a class's burst
# of notebooks is created together rather than two at a time behind the processes of a prefork
# pool. At most once still holds: each task claims its workload's transition first
# (workloads/tasks.py) and creates under deterministic names (409 adopts), acked late.
LAUNCHES_QUEUE = "launches"
LAUNCH_TASKS = ("workload_create_task", "workload_stop_task", "workload_remove_objects_task",
                "workload_address_release_task")
# all declared: a purge (the tests' between runs) empties them all, a worker started without
# --queues serves them all
app.conf.task_queues = tuple(
    Queue(name, Exchange(name), routing_key=name)
    for name in (app.conf.task_default_queue, LAUNCHES_QUEUE, NOTIFICATIONS_QUEUE))
app.conf.task_routes = {
    **{f"workloads.tasks.{name}": {"queue": LAUNCHES_QUEUE} for name in LAUNCH_TASKS},
    **{f"notifications.tasks.{name}": {"queue": NOTIFICATIONS_QUEUE}
       for name in ("notifications_dispatch_task", "notifications_dispatch_stale",
                    "email_send_task", "webhook_post_task")},
}

app.conf.beat_schedule = {
    "workloads-requeue-stale": {"task": "workloads.tasks.workloads_requeue_stale",
                                "schedule": 30.0},
    "workloads-enforce-runtime": {"task": "workloads.tasks.workloads_enforce_runtime",
                                  "schedule": 30.0},
    "usage-scrape": {"task": "usage.tasks.usage_scrape_task",
                     "schedule": float(os.environ.get("PORTAL_USAGE_SCRAPE_INTERVAL", 15)),
                     "options": {"expires": 14.0}},
    "usage-rollup": {"task": "usage.tasks.usage_rollup_task", "schedule": 60.0,
                     "options": {"expires": 55.0}},
    "usage-prune": {"task": "usage.tasks.usage_prune_task", "schedule": crontab(minute=41)},
    "notifications-dispatch-stale": {"task": "notifications.tasks.notifications_dispatch_stale",
                                     "schedule": 60.0, "options": {"expires": 55.0}},
    "usage-idle-check": {"task": "usage.tasks.usage_idle_check_task",
                         "schedule": float(os.environ.get("PORTAL_IDLE_CHECK_SECONDS", 60)),
                         "options": {"expires": 55.0}},
    "usage-gpu-health": {"task": "usage.tasks.usage_gpu_health_task",
                         "schedule": float(os.environ.get("PORTAL_USAGE_SCRAPE_INTERVAL", 15)),
                         "options": {"expires": 14.0}},
    # projects' allocations: their managers told of an end coming, and of the hold once past
    # the month that ended closed: its statement frozen (billing/services.py)
    "billing-months-close": {"task": "billing.tasks.months_close_task", "schedule": 3600.0,
                             "options": {"expires": 3500.0}},
    "allocations-notify": {"task": "allocations.tasks.allocations_notify_task",
                           "schedule": 3600.0, "options": {"expires": 3500.0}},
    # requests' temporary grants taken back at their end, with notice
    "requests-end": {"task": "allocations.tasks.requests_end_task", "schedule": 60.0,
                     "options": {"expires": 55.0}},
    # GPU-hour budgets: thresholds, the queue hold and its reset, stop at exhaustion
    "budgets-check": {"task": "budgets.tasks.budgets_check_task", "schedule": 60.0},
    # maintenance windows: notices 24 h and 1 h ahead, cordon and drain at the start, uncordon
    # at the end
    "maintenance-windows": {"task": "calendars.tasks.maintenance_windows_task", "schedule": 60.0,
                            "options": {"expires": 55.0}},
    # the calendar: reservations raise quotas while they run, warn borrowers, release unused
    "reservations": {"task": "calendars.tasks.reservations_task", "schedule": 60.0,
                     "options": {"expires": 55.0}},
    # a project's file server stopped once no one used it for PORTAL_FILES_IDLE_MINUTES
    "files-stop-idle": {"task": "files.tasks.files_stop_idle_task", "schedule": 60.0,
                        "options": {"expires": 55.0}},
    # a secret whose Kubernetes Secret is gone (its namespace made again) marked lost, its
    # owner told; a Secret no row holds deleted
    "secrets-sweep": {"task": "credentials.tasks.secrets_sweep_task", "schedule": 300.0,
                      "options": {"expires": 290.0}},
    "tenants-reconcile-all": {"task": "tenants.tasks.tenants_reconcile_all", "schedule": 300.0},
    "tenants-delete-due": {"task": "tenants.tasks.tenants_delete_due", "schedule": 60.0},
    "tenants-sync-keystone": {"task": "tenants.tasks.tenants_sync_keystone", "schedule": 600.0},
    "cluster-probe": {"task": "portal.tasks.cluster_probe_task", "schedule": 15.0,
                      "options": {"expires": 14.0}},
    # the home cluster's MultiKueue objects for the workers: repaired, their tokens renewed
    "clusters-dispatch": {"task": "clusters.tasks.cluster_dispatch_task", "schedule": 300.0,
                          "options": {"expires": 290.0}},
    "sessions-clear-expired": {
        "task": "portal.tasks.sessions_clear_expired",
        "schedule": crontab(minute=17),
    },
}
