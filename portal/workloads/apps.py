from django.apps import AppConfig


class WorkloadsConfig(AppConfig):
    name = "portal.workloads"
    label = "workloads"
    verbose_name = "Workloads"
