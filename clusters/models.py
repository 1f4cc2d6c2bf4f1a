"""The clusters the portal reaches: the home one it runs beside (made from the settings by the
first migration) and the ones admins register. A cluster's credentials are never kept here,
only where they are: a kubeconfig file's path or a Secret of the home cluster."""

from __future__ import annotations

from django.conf import settings
from django.db import models


def home_cluster_name() -> str:
    """The home cluster's name (PORTAL_CLUSTER_NAME): what every workload ran on before
    there were several clusters, and where a launch goes unless it names another."""
    return str(settings.PORTAL_CLUSTER_NAME)


class Cluster(models.Model):
    class State(models.TextChoices):
        READY = "ready"
        UNREACHABLE = "unreachable"

    # a DNS label: it names the cluster in the API, gpuctl and the workloads' rows, for good
    name = models.SlugField(max_length=40, unique=True)
    display_name = models.CharField(max_length=100, blank=True)
    # the API server's address as its connection names it (recorded by the probe)
    api_server = models.CharField(max_length=255, blank=True)
    # where its credentials are (one of the two; neither for the home cluster: the settings')
    kubeconfig_path = models.CharField(max_length=500, blank=True)
    kubeconfig_secret = models.CharField(max_length=253, blank=True)  # "namespace/name"
    # the GPU types (catalogue slugs) it offers; empty: whatever its nodes carry
    gpu_types = models.JSONField(default=list, blank=True)
    home = models.BooleanField(default=False)
    enabled = models.BooleanField(default=True)
    state = models.CharField(max_length=16, choices=State.choices, default=State.READY)
    reason = models.CharField(max_length=300, blank=True)
    state_since = models.DateTimeField(null=True, blank=True)
    last_seen = models.DateTimeField(null=True, blank=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-home", "name"]
        constraints = [
            models.UniqueConstraint(fields=["home"], condition=models.Q(home=True),
                                    name="clusters_one_home"),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def label(self) -> str:
        return self.display_name or self.name

    @property
    def credentials(self) -> str:
        """Where its credentials are, for an admin's eyes (never what they hold)."""
        if self.home:
            return "the portal's own (KUBECONFIG or its service account)"
        if self.kubeconfig_secret:
            return f"Secret {self.kubeconfig_secret}"
        return f"kubeconfig file {self.kubeconfig_path}"

    @property
    def usable(self) -> bool:
        """Whether a launch may go there now."""
        return self.enabled and self.state == self.State.READY
