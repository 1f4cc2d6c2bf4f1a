"""The last log lines of a workload's pod."""

from __future__ import annotations

from portal.kube.client import Kube, KubeRefused

from .manifests import CONTAINER_NAME, LABEL_WORKLOAD_ID
from .models import Workload


def workload_logs(workload: Workload, *, tail: int = 100, kube: Kube | None = None) -> list[str]:
    """The newest pod's last `tail` lines; [] before it has any (waiting, or no pod yet)."""
    kube = kube or Kube()
    pods = kube.list("Pod", workload.tenant.namespace,
                     label_selector=f"{LABEL_WORKLOAD_ID}={workload.pk}")["items"]
    if not pods:
        return []
    newest = max(pods, key=lambda p: p["metadata"].get("creationTimestamp", ""))
    try:
        text = kube.pod_log(newest["metadata"]["name"], workload.tenant.namespace,
                            container=CONTAINER_NAME, tail_lines=tail)
    except KubeRefused:
        return []  # the container is waiting to start: no logs yet
    return text.splitlines()
