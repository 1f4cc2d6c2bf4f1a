from django.apps import AppConfig


class TenantsConfig(AppConfig):
    name = "tenants"
    verbose_name = "Tenants"

    def ready(self) -> None:
        from identity.hooks import PROJECTS_SEEN

        from . import checks  # noqa: F401  (registers the system checks)
        from .services import tenants_ensure_for_projects

        # every Keystone project a user is seen with gets its tenant (identity cannot
        # import tenants: it is below)
        PROJECTS_SEEN.register("tenants", tenants_ensure_for_projects)
