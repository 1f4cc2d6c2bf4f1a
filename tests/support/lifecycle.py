"""Cluster objects as the lifecycle rules read them: realistic dicts of pods, Jobs,
Deployments, Services and events (shapes as the real API server sends them), for the table tests and the tracker."""

from __future__ import annotations

from typing import Any

from workloads.lifecycle import (
    Observed,
)

NAME = "wl-42-train"
NS = "gpu-vision-lab"
NODE = "gpu-a100-1"
UNSCHEDULABLE = (
    "0/7 nodes are available: 1 Insufficient nvidia.com/gpu, 6 node(s) didn't match Pod's node "
    "affinity/selector. preemption: 0/7 nodes are available: 1 No preemption victims found for "
    "incoming pod, 6 Preemption is not helpful for scheduling.")


def running(started: str = "2025-05-01T10:00:05Z") -> dict[str, Any]:
    return {"running": {"startedAt": started}}


def terminated(code: int, reason: str | None = None) -> dict[str, Any]:
    return {"terminated": {"exitCode": code, "reason": reason or ("Completed" if code == 0 else "Error"),
                           "startedAt": "2025-05-01T10:00:05Z",
                           "finishedAt": "2025-05-01T10:01:05Z",
                           "containerID": "containerd://abc"}}


def waiting(reason: str, message: str = "") -> dict[str, Any]:
    return {"waiting": {"reason": reason, **({"message": message} if message else {})}}


def pod(phase: str = "Pending", *, state: dict | None = None, node: str | None = NODE,
        ready: bool = False, restarts: int = 0, last: dict | None = None,
        scheduled: dict | None = None, created: str = "2025-05-01T10:00:00Z",
        name: str = f"{NAME}-abcde", deleting: bool = False) -> dict[str, Any]:
    conditions = [scheduled or {"type": "PodScheduled", "status": "True"}]
    if phase == "Running":
        conditions.append({"type": "Ready", "status": "True" if ready else "False",
                           **({} if ready else {"reason": "ContainersNotReady",
                                                "message": "containers with unready status: [app]"})})
    container: dict[str, Any] = {"name": "app", "image": "docker.io/library/busybox:1.36",
                                 "imageID": "", "ready": ready, "started": phase == "Running",
                                 "restartCount": restarts, "state": state or {},
                                 "lastState": last or {}}
    meta: dict[str, Any] = {"name": name, "namespace": NS, "creationTimestamp": created,
                            "labels": {"gpu-portal.io/workload-id": "42"}}
    if deleting:
        meta["deletionTimestamp"] = "2025-05-01T10:05:00Z"
    spec: dict[str, Any] = {"containers": [{"name": "app"}]}
    if node:
        spec["nodeName"] = node
    status: dict[str, Any] = {"phase": phase, "conditions": conditions}
    if state is not None or phase != "Pending":
        status["containerStatuses"] = [container]
    return {"metadata": meta, "spec": spec, "status": status}


def with_proxy(pod_: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
    """The pod with a service's authenticating proxy beside the application, in `state`."""
    pod_["spec"]["containers"].append({"name": "auth-proxy"})
    pod_["status"]["containerStatuses"].append({
        "name": "auth-proxy", "image": "quay.io/oauth2-proxy/oauth2-proxy:v7.15.4",
        "imageID": "", "ready": False, "started": False, "restartCount": 0, "state": state,
        "lastState": {}})
    return pod_


def unscheduled() -> dict[str, Any]:
    return pod(node=None, scheduled={"type": "PodScheduled", "status": "False",
                                     "reason": "Unschedulable", "message": UNSCHEDULABLE})


def job(*conditions: tuple[str, str, str], failed: int = 0, backoff_limit: int = 0,
        completion: str | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {"active": 0 if conditions else 1, "failed": failed,
                              "startTime": "2025-05-01T10:00:00Z",
                              "conditions": [{"type": t, "status": "True", "reason": r, "message": m}
                                             for t, r, m in conditions]}
    if completion:
        status["completionTime"] = completion
    return {"metadata": {"name": NAME, "namespace": NS},
            "spec": {"backoffLimit": backoff_limit, "completions": 1}, "status": status}


def deployment(*, replica_failure: str | None = None) -> dict[str, Any]:
    conditions = [{"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable"}]
    if replica_failure:
        conditions.append({"type": "ReplicaFailure", "status": "True", "reason": "FailedCreate",
                           "message": replica_failure})
    return {"metadata": {"name": NAME, "namespace": NS},
            "status": {"replicas": 1, "conditions": conditions}}


def service(ip: str | None = None) -> dict[str, Any]:
    lb = {"ingress": [{"ip": ip, "ipMode": "VIP"}]} if ip else {}
    return {"metadata": {"name": NAME, "namespace": NS}, "spec": {"type": "LoadBalancer"},
            "status": {"loadBalancer": lb}}


def cluster_ip_service() -> dict[str, Any]:
    return {"metadata": {"name": NAME, "namespace": NS}, "spec": {"type": "ClusterIP"},
            "status": {"loadBalancer": {}}}


def event(reason: str, message: str, *, kind: str = "Job", name: str = NAME,
          last: str = "2025-05-01T10:00:01Z", type_: str = "Warning") -> dict[str, Any]:
    return {"metadata": {"name": f"{name}.1", "namespace": NS, "uid": f"uid-{reason}-{last}"},
            "involvedObject": {"kind": kind, "name": name, "namespace": NS},
            "reason": reason, "message": message, "type": type_, "count": 1,
            "lastTimestamp": last}


def batch(*pods: dict, job_obj: dict | None = None, events: tuple = ()) -> Observed:
    return Observed(kind="batch", pods=pods, job=job_obj if job_obj is not None else job(),
                    events=events)


def svc(*pods: dict, ip: str | None = None, dep: dict | None = None,
        events: tuple = ()) -> Observed:
    return Observed(kind="service", pods=pods, deployment=dep or deployment(),
                    service=service(ip), events=events)


BACKOFF = ("Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit")
DEADLINE = ("Failed", "DeadlineExceeded", "Job was active longer than specified deadline")
COMPLETE = ("Complete", "Completed", "")
