from django.apps import AppConfig


class CatalogueConfig(AppConfig):
    name = "catalogue"
    label = "catalogue"
    verbose_name = "GPU types and templates"

    def ready(self) -> None:
        from cluster.capacity import register_source

        from .models import GpuType

        # the capacity view's GPU types (cluster is below the catalogue)
        register_source("gpu_types", lambda: list(GpuType.objects.all()))
