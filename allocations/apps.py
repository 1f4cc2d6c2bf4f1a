from django.apps import AppConfig


class AllocationsConfig(AppConfig):
    name = "allocations"
    label = "allocations"
    verbose_name = "Project records and allocations"

    def ready(self) -> None:
        from workloads.hooks import ADMISSION_CHECKS

        from .admission import allocation_admission_check

        # workloads cannot import this app: a project whose allocation ended launches nothing
        ADMISSION_CHECKS.register("allocation", allocation_admission_check)
