from django.apps import AppConfig


class WorkloadsConfig(AppConfig):
    name = "workloads"
    label = "workloads"
    verbose_name = "Workloads"

    def ready(self) -> None:
        from cluster.capacity import register_source
        from tenants.signals import tenant_deleting

        from . import checks  # noqa: F401 - registers the system checks
        from .selectors import workloads_admitted
        from .services import workloads_stop_for_tenant

        # a tenant being deleted stops its workloads (tenants cannot import this app)
        tenant_deleting.connect(workloads_stop_for_tenant, dispatch_uid="workloads_stop_for_tenant")
        # the capacity view counts admitted workloads whose pods are not bound yet
        register_source("admitted", workloads_admitted)
