"""PID → pod: which pod a process NVML reports on a GPU belongs to.

Allocation (which pods hold a GPU) still comes from the kubelet's pod-resources API; this only
says which of those holders a running process is, so that a time-sliced GPU's per-process
figures can be given to each pod on it.

`CgroupPods` reads the process's cgroup (`<proc>/<pid>/cgroup`): the kubelet puts every
container in a cgroup under its pod's, named with the pod UID (`…/kubepods/burstable/pod<uid>/…`
with the cgroupfs driver and cgroup v1, `…/kubepods-burstable-pod<uid_with_underscores>.slice/…`
with the systemd driver). The pod's namespace and name come from the kubelet's log directory,
`/var/log/pods/<namespace>_<pod>_<uid>/`, which the kubelet makes for every pod on the node (log
collectors read pod identity from it the same way); only the directory's names are read. No API
token, no CRI socket: it needs the host's PID namespace (PIDs from NVML are the host's) and a
read-only mount of /var/log/pods. See README.md, "Usage per pod on a shared GPU".
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from typing import Protocol

PodRef = tuple[str, str]  # (namespace, pod)

DEFAULT_PROC = "/proc"
DEFAULT_POD_LOGS = "/var/log/pods"

_UID = r"[0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12}"
_POD_IN_CGROUP = re.compile(rf"pod({_UID})")
_POD_LOG_DIR = re.compile(rf"^([^_]+)_([^_]+)_({_UID})$")


class ProcessMappingError(Exception):
    """Processes cannot be attributed to pods at all (no pod log directory, mapping off)."""


class ProcessMapper(Protocol):
    def pod_of(self, pid: int) -> PodRef | None:
        """The pod a host PID runs in; None for a process outside any pod (or gone).
        Raises ProcessMappingError when no process can be attributed."""
        ...


def pod_uid_from_cgroup(text: str) -> str | None:
    """The pod UID in the contents of /proc/<pid>/cgroup (v1 or v2, either cgroup driver)."""
    for line in text.splitlines():
        found = _POD_IN_CGROUP.search(line.rsplit(":", 1)[-1])
        if found:
            return found.group(1).replace("_", "-")
    return None


class CgroupPods:
    """`ProcessMapper` over the host's /proc and the kubelet's pod log directory."""

    def __init__(self, proc_root: str = DEFAULT_PROC, pod_logs: str = DEFAULT_POD_LOGS) -> None:
        self.proc_root = proc_root
        self.pod_logs = pod_logs
        self._pods: dict[str, PodRef] = {}

    def _refresh(self) -> None:
        try:
            names = os.listdir(self.pod_logs)
        except OSError as exc:
            raise ProcessMappingError(f"{self.pod_logs}: {exc.strerror or exc}") from exc
        pods: dict[str, PodRef] = {}
        for name in names:
            found = _POD_LOG_DIR.match(name)
            if found:
                pods[found.group(3)] = (found.group(1), found.group(2))
        self._pods = pods

    def pod_of(self, pid: int) -> PodRef | None:
        try:
            with open(os.path.join(self.proc_root, str(pid), "cgroup"), encoding="utf-8") as fh:
                uid = pod_uid_from_cgroup(fh.read())
        except OSError:
            return None  # the process ended, or is not visible
        if uid is None:
            return None
        if uid not in self._pods:  # a pod started since the last look
            self._refresh()
        return self._pods.get(uid)


class StaticProcessMapping:
    """`ProcessMapper` with a fixed (or computed) answer: the fakes."""

    def __init__(self, pods: Mapping[int, PodRef] | Callable[[], Mapping[int, PodRef]]) -> None:
        self._pods = pods

    def pod_of(self, pid: int) -> PodRef | None:
        pods = self._pods() if callable(self._pods) else self._pods
        return pods.get(pid)


class NoProcessMapping:
    """`ProcessMapper` where processes are not attributed (`--no-process-mapping`): a shared
    GPU's figures are then the device's, and marked so."""

    def pod_of(self, pid: int) -> PodRef | None:
        raise ProcessMappingError("process attribution is off")
