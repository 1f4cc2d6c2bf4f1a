from django.apps import AppConfig


class ClustersConfig(AppConfig):
    name = "clusters"
    label = "clusters"
    verbose_name = "Clusters"

    def ready(self) -> None:
        from kube.hooks import CLUSTER_CONNECTIONS

        from .selectors import cluster_connection

        # the Kubernetes client reaches the clusters registered here (kube is below this app)
        CLUSTER_CONNECTIONS.register("clusters", cluster_connection)
