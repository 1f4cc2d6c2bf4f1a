"""What the apps above tell the Kubernetes client about the clusters it may reach, which it
may not import (they import it): the clusters app's registry of clusters, as connections.

The home cluster (the one the portal runs beside, PORTAL_CLUSTER_NAME) needs no entry: its
connection is the settings' KUBECONFIG, or the pod's own service account. Every other cluster
is reached through what the entry answers for its name: a kubeconfig file, or a Secret in the
home cluster that holds one (never its content here: only where to find it)."""

from __future__ import annotations

import dataclasses
from typing import Protocol

from core.registry import Hook


@dataclasses.dataclass(frozen=True)
class ClusterConnection:
    """Where a cluster's credentials are: a kubeconfig file's path, or a Secret of the home
    cluster ("namespace/name", its key `kubeconfig`)."""

    name: str
    kubeconfig: str = ""
    secret: str = ""


class ConnectionSource(Protocol):
    """The connection of the cluster named, or None when no such cluster is registered (or it
    is disabled)."""

    def __call__(self, name: str) -> ClusterConnection | None: ...


CLUSTER_CONNECTIONS = Hook[ConnectionSource]("kube.cluster_connections", order=("clusters",))
