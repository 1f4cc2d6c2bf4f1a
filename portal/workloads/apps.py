from django.apps import AppConfig


class WorkloadsConfig(AppConfig):
    name = "portal.workloads"
    label = "workloads"
    verbose_name = "Workloads"

    def ready(self) -> None:
        from . import checks  # noqa: F401 - registers the system checks
