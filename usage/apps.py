from django.apps import AppConfig


class UsageConfig(AppConfig):
    name = "usage"
    label = "usage"
    verbose_name = "GPU usage"

    def ready(self) -> None:
        from cluster.hooks import UNHEALTHY

        from .health import unhealthy_gpus_by_node

        # GPUs that GPU health took out of service are not free (the capacity view's source)
        UNHEALTHY.register("usage", unhealthy_gpus_by_node)
