from django.apps import AppConfig


class TenantsConfig(AppConfig):
    name = "tenants"
    verbose_name = "Tenants"

    def ready(self) -> None:
        from identity.signals import projects_seen

        from . import checks  # noqa: F401  (registers the system checks)
        from .services import tenants_ensure_for_projects

        # every Keystone project a user is seen with gets its tenant (identity cannot
        # import tenants: it is below)
        projects_seen.connect(tenants_ensure_for_projects, dispatch_uid="tenants_ensure")
