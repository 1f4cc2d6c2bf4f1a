from django.apps import AppConfig


class PortalConfig(AppConfig):
    name = "portal"
    verbose_name = "GPU portal"

    def ready(self) -> None:
        from celery import signals

        from . import metrics

        # failed tasks are counted for /metrics wherever the worker runs
        signals.task_failure.connect(metrics.task_failed, weak=False,
                                     dispatch_uid="portal-metrics-task-failure")
