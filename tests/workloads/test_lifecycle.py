"""Workload states from cluster objects: tables of realistic dicts (shapes as in FACTS.md)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from workloads.lifecycle import (
    CRASH_LOOP_RESTARTS,
    Observed,
    current_pod,
    workload_outcome,
)
from workloads.models import Workload

S = Workload.State
NAME = "wl-42-train"
NS = "gpu-vision-lab"
NODE = "gpu-a100-1"
UNSCHEDULABLE = (
    "0/7 nodes are available: 1 Insufficient nvidia.com/gpu, 6 node(s) didn't match Pod's node "
    "affinity/selector. preemption: 0/7 nodes are available: 1 No preemption victims found for "
    "incoming pod, 6 Preemption is not helpful for scheduling.")
QUOTA = ('pods "wl-42-train-x2x9k" is forbidden: exceeded quota: gpu-portal-quota, requested: '
         "requests.nvidia.com/gpu=2, used: requests.nvidia.com/gpu=0, limited: "
         "requests.nvidia.com/gpu=1")


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

CASES = [
    # (id, current state, observed, expected state, expected reason, expected fields ⊆)
    ("unschedulable: the scheduler's words", S.PENDING, batch(unscheduled()),
     S.PENDING, UNSCHEDULABLE, {}),
    ("not yet looked at by the scheduler", S.CREATING, batch(pod(node=None)),
     S.PENDING, "Waiting for the scheduler.", {}),
    ("scheduled, container being created", S.PENDING,
     batch(pod(state=waiting("ContainerCreating"))), S.PENDING, f"Starting on {NODE}.",
     {"node": NODE}),
    ("image pull error", S.PENDING,
     batch(pod(state=waiting("ErrImagePull", 'failed to pull and unpack image '
                                             '"docker.io/nonexistent/x:nope": not found'))),
     S.PENDING, 'ErrImagePull: failed to pull and unpack image "docker.io/nonexistent/x:nope": '
                "not found", {"node": NODE}),
    ("image pull back-off", S.PENDING,
     batch(pod(state=waiting("ImagePullBackOff", 'Back-off pulling image "nonexistent/x:nope"'))),
     S.PENDING, 'ImagePullBackOff: Back-off pulling image "nonexistent/x:nope"', {}),
    ("Job pod refused by quota (FailedCreate event)", S.PENDING,
     batch(events=(event("FailedCreate", f"Error creating: {QUOTA}"),)),
     S.PENDING, f"The namespace quota refused its pod: {QUOTA}", {}),
    ("Deployment pod refused by quota (ReplicaFailure)", S.PENDING,
     svc(dep=deployment(replica_failure=QUOTA)),
     S.PENDING, f"The namespace quota refused its pod: {QUOTA}", {}),
    ("another creation error", S.PENDING,
     batch(events=(event("FailedCreate", 'Error creating: pods "x" is forbidden: no SA'),)),
     S.PENDING, 'The cluster could not create its pod: pods "x" is forbidden: no SA', {}),
    ("a pod now exists: an old FailedCreate no longer speaks", S.PENDING,
     batch(pod("Running", state=running()), events=(event("FailedCreate", QUOTA),)),
     S.RUNNING, "", {"node": NODE}),
    ("batch pod running", S.PENDING, batch(pod("Running", state=running())),
     S.RUNNING, "", {"node": NODE,
                     "started_at": dt.datetime(2025, 5, 1, 10, 0, 5, tzinfo=dt.UTC)}),
    ("Job complete: exit code 0", S.RUNNING,
     batch(pod("Succeeded", state=terminated(0)),
           job_obj=job(COMPLETE, completion="2025-05-01T10:01:06Z")),
     S.SUCCEEDED, "Completed.", {"exit_code": 0, "finished_at":
                                 dt.datetime(2025, 5, 1, 10, 1, 6, tzinfo=dt.UTC)}),
    ("Job success decided (1.31+: SuccessCriteriaMet first)", S.RUNNING,
     batch(pod("Succeeded", state=terminated(0)),
           job_obj=job(("SuccessCriteriaMet", "CompletionsReached", "Reached expected number "
                                                                    "of succeeded pods"))),
     S.SUCCEEDED, "Completed.", {"exit_code": 0}),
    ("pod succeeded before the Job says so", S.RUNNING,
     batch(pod("Succeeded", state=terminated(0))), S.SUCCEEDED, "Completed.", {"exit_code": 0}),
    ("Job failed: backoff limit, exit code 3", S.RUNNING,
     batch(pod("Failed", state=terminated(3)), job_obj=job(BACKOFF, failed=1)),
     S.FAILED, "The container exited with code 3 (Error). Job has reached the specified "
               "backoff limit.", {"exit_code": 3}),
    ("Job failed: deadline", S.RUNNING,
     batch(pod("Failed", state=terminated(137, "Error")), job_obj=job(DEADLINE)),
     S.FAILED, "It reached its maximum runtime: Job was active longer than specified deadline.",
     {"exit_code": 137}),
    ("failure decided (FailureTarget) while the pod is still killed", S.RUNNING,
     batch(pod("Running", state=running()),
           job_obj=job(("FailureTarget", "DeadlineExceeded",
                        "Job was active longer than specified deadline"))),
     S.FAILED, "It reached its maximum runtime: Job was active longer than specified deadline.",
     {}),
    ("pod failed, the Job retries", S.RUNNING,
     batch(pod("Failed", state=terminated(1)), job_obj=job(failed=1, backoff_limit=2)),
     S.PENDING, "The container exited with code 1 (Error). The Job retries it (attempt 2 of 3).",
     {"exit_code": 1}),
    ("pod failed, no retries left: the Job's verdict follows", S.RUNNING,
     batch(pod("Failed", state=terminated(2)), job_obj=job(failed=0, backoff_limit=0)),
     S.RUNNING, "The container exited with code 2 (Error). Waiting for the Job's verdict.",
     {"exit_code": 2}),
    ("a bare pod failed (no Job)", S.RUNNING,
     Observed(kind="batch", pods=(pod("Failed", state=terminated(2)),)),
     S.FAILED, "The container exited with code 2 (Error).", {"exit_code": 2}),
    ("service started, not ready yet", S.PENDING, svc(pod("Running", state=running())),
     S.PENDING, f"Started on {NODE}; waiting until it is ready.", {"node": NODE}),
    ("service ready, address assigned", S.PENDING,
     svc(pod("Running", state=running(), ready=True), ip="192.168.1.240"),
     S.RUNNING, "", {"node": NODE, "address": "192.168.1.240"}),
    ("service ready, no address yet", S.PENDING,
     svc(pod("Running", state=running(), ready=True)),
     S.RUNNING, "Running; waiting for the load balancer to assign an external address.",
     {"node": NODE}),
    ("service ready, the pool has no address free (MetalLB's AllocationFailed)", S.PENDING,
     svc(pod("Running", state=running(), ready=True),
         events=(event("AllocationFailed", f'Failed to allocate IP for "{NS}/{NAME}": no '
                       "available IPs", kind="Service"),)),
     S.RUNNING, "Running; waiting for an address: the address pool has none free (the load "
                f'balancer: Failed to allocate IP for "{NS}/{NAME}": no available IPs). It gets '
                "one as soon as another service's address is freed.", {"node": NODE}),
    ("service ready, the pool it names has none free (MetalLB v0.15.2's words)", S.PENDING,
     svc(pod("Running", state=running(), ready=True),
         events=(event("AllocationFailed", f'Failed to allocate IP for "{NS}/{NAME}": '
                       '["<nil>"] is not allowed in config', kind="Service"),)),
     S.RUNNING, "Running; waiting for an address: the address pool has none free (the load "
                f'balancer: Failed to allocate IP for "{NS}/{NAME}": ["<nil>"] is not allowed '
                "in config). It gets one as soon as another service's address is freed.",
     {"node": NODE}),
    ("service ready, an address assigned after a failure: on its way", S.PENDING,
     svc(pod("Running", state=running(), ready=True),
         events=(event("AllocationFailed", "no available IPs", kind="Service"),
                 event("IPAllocated", 'Assigned IP ["192.168.1.240"]', kind="Service",
                       last="2025-05-01T10:00:09Z", type_="Normal"))),
     S.RUNNING, "Running; waiting for the load balancer to assign an external address.",
     {"node": NODE}),
    ("service ready, its pool unknown to the load balancer", S.PENDING,
     svc(pod("Running", state=running(), ready=True),
         events=(event("AllocationFailed", f'Failed to allocate IP for "{NS}/{NAME}": unknown '
                       'pool "gpu"', kind="Service"),)),
     S.RUNNING, "Running; the load balancer cannot assign it an address: Failed to allocate "
                f'IP for "{NS}/{NAME}": unknown pool "gpu"', {"node": NODE}),
    ("shared gateway: running with its host name from its Ingress", S.PENDING,
     Observed(kind="service", pods=(pod("Running", state=running(), ready=True),),
              deployment=deployment(), service=cluster_ip_service(),
              ingress={"metadata": {"name": NAME, "namespace": NS},
                       "spec": {"rules": [{"host": "w-7.apps.example.test"}]}}),
     S.RUNNING, "", {"node": NODE, "address": "w-7.apps.example.test"}),
    ("shared gateway: its Ingress is missing", S.RUNNING,
     Observed(kind="service", pods=(pod("Running", state=running(), ready=True),),
              deployment=deployment(), service=cluster_ip_service()),
     S.RUNNING, "Running; its route through the shared gateway (its Ingress) is missing, so it "
                "cannot be reached: stop it and launch it again.", {"node": NODE}),
    ("running service loses readiness: stays running", S.RUNNING,
     svc(pod("Running", state=running()), ip="192.168.1.240"),
     S.RUNNING, f"Started on {NODE}; waiting until it is ready.", {"address": "192.168.1.240"}),
    ("service crash loop, within the allowance", S.RUNNING,
     svc(pod("Running", state=waiting("CrashLoopBackOff", "back-off 20s restarting failed"),
             restarts=2, last=terminated(1))),
     S.RUNNING, f"Restarting: The container exited with code 1 (Error). Restart 2 of "
                f"{CRASH_LOOP_RESTARTS} before it counts as failed.", {"exit_code": 1}),
    ("service crash loop that persists: failed", S.RUNNING,
     svc(pod("Running", state=waiting("CrashLoopBackOff", "back-off 5m0s restarting failed"),
             restarts=CRASH_LOOP_RESTARTS, last=terminated(1))),
     S.FAILED, f"It keeps crashing: The container exited with code 1 (Error). It was "
               f"restarted {CRASH_LOOP_RESTARTS} times (CrashLoopBackOff).", {"exit_code": 1}),
    ("replacement pod wins over the one being deleted", S.RUNNING,
     svc(pod("Running", state=running(), ready=True, deleting=True, name=f"{NAME}-old"),
         unscheduled(), ip="192.168.1.241"),
     S.PENDING, UNSCHEDULABLE, {"address": "192.168.1.241"}),
    ("service whose login proxy cannot pull its image: says which container and why",
     S.PENDING, svc(with_proxy(pod("Running", state=running()),
                               waiting("ImagePullBackOff", 'Back-off pulling image "quay.io/'
                                       'oauth2-proxy/oauth2-proxy:v7.15.4"'))),
     S.PENDING, "Its auth-proxy container (the login in front of it) cannot start: "
                'ImagePullBackOff: Back-off pulling image "quay.io/oauth2-proxy/oauth2-proxy:'
                'v7.15.4"', {"node": NODE}),
    ("running service whose proxy crash-loops stays running, saying so", S.RUNNING,
     svc(with_proxy(pod("Running", state=running()), waiting("CrashLoopBackOff", "back-off")),
         ip="192.168.1.240"),
     S.RUNNING, "Its auth-proxy container (the login in front of it) cannot start: "
                "CrashLoopBackOff: back-off", {"address": "192.168.1.240"}),
    ("stopping, everything gone: stopped, reason kept", S.STOPPING,
     Observed(kind="service"), S.STOPPED, None, {}),
]


@pytest.mark.parametrize(("current", "observed", "state", "reason", "fields"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_outcome(current, observed, state, reason, fields):
    outcome = workload_outcome(current, observed)
    assert outcome is not None
    assert (outcome.state, outcome.reason) == (state, reason)
    assert {k: outcome.fields.get(k) for k in fields} == fields


NO_CHANGE = [
    ("succeeded stays succeeded", S.SUCCEEDED, batch(pod("Running", state=running()))),
    ("failed stays failed", S.FAILED, svc(pod("Running", state=running(), ready=True))),
    ("stopped stays stopped", S.STOPPED, batch(pod("Running", state=running()))),
    ("stopped takes no exit code (its pod was killed by the stop)", S.STOPPED,
     batch(pod("Failed", state=terminated(143)))),
    ("a failed service takes none either", S.FAILED,
     svc(pod("Running", state=waiting("CrashLoopBackOff"), last=terminated(1)))),
    ("stopping belongs to the stop task", S.STOPPING, batch(pod("Running", state=running()))),
    ("no objects: the tracker decides (vanished or not yet created)", S.PENDING,
     Observed(kind="batch")),
    ("events alone are not objects", S.RUNNING,
     Observed(kind="batch", events=(event("Started", "Started container app"),))),
]


@pytest.mark.parametrize(("current", "observed"), [c[1:] for c in NO_CHANGE],
                         ids=[c[0] for c in NO_CHANGE])
def test_no_outcome(current, observed):
    assert workload_outcome(current, observed) is None


LATER_FACTS = [
    ("succeeded before its pod's exit code was seen: takes it after", S.SUCCEEDED,
     batch(pod("Succeeded", state=terminated(0)),
           job_obj=job(COMPLETE, completion="2025-05-01T10:01:06Z")),
     {"exit_code": 0, "finished_at": dt.datetime(2025, 5, 1, 10, 1, 5, tzinfo=dt.UTC)}),
    ("failed at its deadline (FailureTarget) before its pod was killed: the code after",
     S.FAILED, batch(pod("Failed", state=terminated(137, "Error")), job_obj=job(DEADLINE)),
     {"exit_code": 137, "finished_at": dt.datetime(2025, 5, 1, 10, 1, 5, tzinfo=dt.UTC)}),
]


@pytest.mark.parametrize(("current", "observed", "fields"), [c[1:] for c in LATER_FACTS],
                         ids=[c[0] for c in LATER_FACTS])
def test_a_batch_verdict_takes_the_facts_of_its_pods_end_without_moving(current, observed,
                                                                      fields):
    outcome = workload_outcome(current, observed)
    assert outcome is not None
    assert (outcome.state, outcome.reason, outcome.fields) == (current, None, fields)


def test_current_pod_prefers_the_newest_live_one():
    old = pod("Running", created="2025-05-01T10:00:00Z", name="a")
    new = pod("Pending", created="2025-05-01T10:02:00Z", name="b")
    dying = pod("Running", created="2025-05-01T10:03:00Z", name="c", deleting=True)
    assert current_pod([old, dying, new])["metadata"]["name"] == "b"
    assert current_pod([dying])["metadata"]["name"] == "c"
    assert current_pod([]) is None
