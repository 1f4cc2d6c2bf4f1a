"""The last log lines of a workload's pod, and what of them those who may not manage the
workload do not see: its access token, and every `…token=<value>` (a notebook prints the URL
that opens it, `…/lab?token=…`; a custom image may print its own)."""

from __future__ import annotations

import re
from collections.abc import Iterable

from kube.client import Kube, KubeRefused
from kube.labels import LABEL_WORKLOAD_ID

from .lifecycle import Obj, pod_rank
from .manifests import CONTAINER_NAME, MPI
from .models import Workload

REDACTED = "[redacted]"
# a token handed over as key=value: ?token=…, &token=…, --ServerApp.token=…, JUPYTER_TOKEN=…
TOKEN_ASSIGNMENT = re.compile(r"(?i)(\b[\w.-]*token=)[^\s&\"'<>#]+")


Rank = int | str | None  # a distributed workload's rank, "launcher" (MPI), None: the default


class RankUnknown(ValueError):
    """A rank the workload does not have; the message says which it has."""


def ranks_of(workload: Workload) -> list[int | str]:
    """The ranks whose logs can be read: 0 … nodes-1, and an MPIJob's launcher; [] for one pod."""
    engine = (workload.launch_spec or {}).get("engine") or ""
    if not engine:
        return []
    return [*range(workload.nodes), *(["launcher"] if engine == MPI else [])]


def rank_chosen(workload: Workload, rank: Rank) -> Rank:
    """The rank whose logs are read: a distributed workload's rank 0 unless another is asked
    for; RankUnknown for one it does not have (a one-pod workload has none)."""
    ranks = ranks_of(workload)
    if rank is None:
        return 0 if ranks else None
    if rank in ranks:
        return rank
    if not ranks:
        raise RankUnknown("This workload runs as one pod: it has no ranks.")
    has = f"ranks 0 to {workload.nodes - 1}" if workload.nodes > 1 else "rank 0"
    if "launcher" in ranks:
        has += " and the launcher (rank=launcher)"
    raise RankUnknown(f"This workload has {has}; there is no rank {rank}.")


def _rank_pods(pods: list[Obj], rank: Rank) -> list[Obj]:
    """The pods of `rank` (every attempt's: the newest speaks); all of them for None."""
    if rank is None:
        return pods
    return [p for p in pods if pod_rank(p) == rank]


def workload_logs(workload: Workload, *, tail: int = 100, rank: Rank = None,
                  kube: Kube | None = None) -> list[str]:
    """The newest pod's last `tail` lines; [] before it has any (waiting, or no pod yet). A
    distributed workload's: that of `rank` (rank 0 by default, "launcher" for an MPIJob's);
    RankUnknown for a rank it does not have. The pods are read where they run: a job
    dispatched to a worker cluster, through that cluster's API."""
    rank = rank_chosen(workload, rank)
    kube = kube or Kube(cluster=workload.cluster)
    pods = kube.list("Pod", workload.tenant.namespace,
                     label_selector=f"{LABEL_WORKLOAD_ID}={workload.pk}")["items"]
    pods = _rank_pods(pods, rank)
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
