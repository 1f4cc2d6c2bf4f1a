from django.apps import AppConfig


class WorkloadsConfig(AppConfig):
    name = "workloads"
    label = "workloads"
    verbose_name = "Workloads"

    def ready(self) -> None:
        from cluster.hooks import ADMITTED
        from storage.hooks import DATASET_USERS, VOLUME_USERS
        from tenants.hooks import DEPARTMENT_USE, TENANT_DELETING

        from . import checks  # noqa: F401 - registers the system checks
        from .advice import capacity_outlook_advice, fit_advice
        from .hooks import LAUNCH_ADVISORS
        from .selectors import dataset_users, department_use, volume_users, workloads_admitted
        from .services import workloads_stop_for_tenant

        # a tenant being deleted stops its workloads (tenants cannot import this app)
        TENANT_DELETING.register("workloads", workloads_stop_for_tenant)
        # a department's page shows its use as the admission counts it against its caps
        DEPARTMENT_USE.register("workloads", department_use)
        # a volume that live workloads mount is not deleted (storage cannot import this app)
        VOLUME_USERS.register("workloads", volume_users)
        # nor is a dataset deleted, or closed to a project, where live workloads mount it
        DATASET_USERS.register("workloads", dataset_users)
        # the capacity view counts admitted workloads whose pods are not bound yet
        ADMITTED.register("workloads", workloads_admitted)
        # this app's own advice before a launch: the cluster and the quota, the capacity
        # outlook (the catalogue's, which the calendar adds to)
        LAUNCH_ADVISORS.register("fit", fit_advice)
        LAUNCH_ADVISORS.register("capacity-outlook", capacity_outlook_advice)
