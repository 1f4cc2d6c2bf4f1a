"""The last log lines of a workload's pod, and what of them those who may not manage the
workload do not see: its access token, and every `…token=<value>` (a notebook prints the URL
that opens it, `…/lab?token=…`; a custom image may print its own)."""

from __future__ import annotations

import re
from collections.abc import Iterable

from kube.client import Kube, KubeRefused
from kube.labels import LABEL_WORKLOAD_ID

from .manifests import CONTAINER_NAME
from .models import Workload

REDACTED = "[redacted]"
# a token handed over as key=value: ?token=…, &token=…, --ServerApp.token=…, JUPYTER_TOKEN=…
TOKEN_ASSIGNMENT = re.compile(r"(?i)(\b[\w.-]*token=)[^\s&\"'<>#]+")


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


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` without the given secret values nor the value of any `…token=`."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, REDACTED)
    return TOKEN_ASSIGNMENT.sub(lambda match: match.group(1) + REDACTED, text)


def workload_redact(workload: Workload, lines: Iterable[str]) -> list[str]:
    """`lines` as someone who may see that the workload runs, but not how to get in, reads
    them: without its access token (Jupyter's, which the authenticating proxy sends upstream;
    with it anyone who reaches the application's port is in) and other token values."""
    return [redact(line, (workload.access_token,)) for line in lines]
