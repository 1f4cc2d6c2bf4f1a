from django.apps import AppConfig


class WorkloadsConfig(AppConfig):
    name = "portal.workloads"
    label = "workloads"
    verbose_name = "Workloads"

    def ready(self) -> None:
        from tenants.signals import tenant_deleting

        from . import checks  # noqa: F401 - registers the system checks
        from .services import workloads_stop_for_tenant

        # a tenant being deleted stops its workloads (tenants cannot import this app)
        tenant_deleting.connect(workloads_stop_for_tenant, dispatch_uid="workloads_stop_for_tenant")
