from django.apps import AppConfig


class CatalogueConfig(AppConfig):
    name = "catalogue"
    label = "catalogue"
    verbose_name = "GPU types and templates"

    def ready(self) -> None:
        from cluster.hooks import GPU_TYPES

        from .models import GpuType

        # the capacity view's GPU types (cluster is below the catalogue)
        GPU_TYPES.register("catalogue", lambda: list(GpuType.objects.all()))
