from django.apps import AppConfig


class StorageConfig(AppConfig):
    name = "storage"
    label = "storage"
    verbose_name = "Volumes, storage classes and datasets"

    def ready(self) -> None:
        from tenants.hooks import CLAIM_ALLOWANCES, TENANT_DELETING

        from .services import datasets_release_for_tenant, storage_allowance_of

        # a tenant's ResourceQuota leaves room for the claims of the datasets open to it
        # (tenants cannot import this app)
        CLAIM_ALLOWANCES.register("storage", storage_allowance_of)
        # a tenant being deleted lets its datasets' volumes go (they are cluster-scoped)
        TENANT_DELETING.register("storage", datasets_release_for_tenant)
