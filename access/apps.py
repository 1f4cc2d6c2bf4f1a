from django.apps import AppConfig


class AccessConfig(AppConfig):
    name = "access"
    label = "access"
    verbose_name = "Workload access"

    def ready(self) -> None:
        from . import checks  # noqa: F401 - registers the system checks
