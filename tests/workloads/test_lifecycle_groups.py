"""A distributed workload's state and ranks from its JobSet or MPIJob and their pods: tables of
realistic dicts, shaped after JobSet v0.12.0's and the MPI operator v0.8.2's status types (the
JobSet's conditions Completed/Failed/Suspended and status.restarts; the MPIJob's conditions
Created/Running/Succeeded/Failed and replicaStatuses) and what they label their pods with."""

from __future__ import annotations

from typing import Any

import pytest

from workloads.lifecycle import Observed, group_ranks, workload_outcome
from workloads.models import Workload

S = Workload.State
NAME = "wl-42-ddp"
NS = "gpu-vision-lab"
UNSCHEDULABLE = ("0/4 nodes are available: 2 Insufficient nvidia.com/gpu, 2 node(s) didn't "
                 "match pod anti-affinity rules. preemption: 0/4 nodes are available: 4 No "
                 "preemption victims found for incoming pod.")


def condition(kind: str, status: str = "True", reason: str = "", message: str = "",
              at: str = "2025-05-01T10:10:00Z") -> dict[str, Any]:
    return {"type": kind, "status": status, "reason": reason, "message": message,
            "lastTransitionTime": at}


def jobset(*, nodes: int = 2, suspend: bool = False, restarts: int = 0, max_restarts: int = 0,
           conditions: list | None = None) -> dict[str, Any]:
    """A JobSet as workloads/manifests.py makes it and JobSet reports it."""
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"name": NAME, "namespace": NS,
                     "labels": {"gpu-portal.io/workload-id": "42",
                                "app.kubernetes.io/managed-by": "gpu-portal"}},
        "spec": {"suspend": suspend, "failurePolicy": {"maxRestarts": max_restarts},
                 "network": {"enableDNSHostnames": True, "subdomain": NAME},
                 "replicatedJobs": [{"name": "r", "replicas": 1, "template": {"spec": {
                     "completionMode": "Indexed", "completions": nodes, "parallelism": nodes,
                     "backoffLimit": 0}}}]},
        "status": {"restarts": restarts, "restartsCountTowardsMax": restarts,
                   "conditions": conditions or [],
                   "replicatedJobsStatus": [{"name": "r", "ready": 0, "succeeded": 0,
                                             "failed": 0, "active": 1, "suspended": 0}]},
    }


def mpijob(*, workers: int = 2, suspend: bool = False, backoff_limit: int = 0,
           conditions: list | None = None, launcher_failed: int = 0,
           completion: str | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {
        "conditions": conditions or [condition("Created", reason="MPIJobCreated")],
        "replicaStatuses": {"Launcher": {"failed": launcher_failed}, "Worker": {"active": 2}}}
    if completion:
        status["completionTime"] = completion
    return {
        "apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
        "metadata": {"name": NAME, "namespace": NS,
                     "labels": {"gpu-portal.io/workload-id": "42"}},
        "spec": {"slotsPerWorker": 4,
                 "runPolicy": {"suspend": suspend, "backoffLimit": backoff_limit,
                               "cleanPodPolicy": "Running"},
                 "mpiReplicaSpecs": {"Launcher": {"replicas": 1}, "Worker": {"replicas": workers}}},
        "status": status,
    }


def running(started: str = "2025-05-01T10:00:05Z") -> dict[str, Any]:
    return {"running": {"startedAt": started}}


def terminated(code: int, finished: str = "2025-05-01T10:01:05Z",
               reason: str | None = None) -> dict[str, Any]:
    return {"terminated": {"exitCode": code,
                           "reason": reason or ("Completed" if code == 0 else "Error"),
                           "startedAt": "2025-05-01T10:00:05Z", "finishedAt": finished}}


def pod(name: str, phase: str = "Running", *, state: dict | None = None,
        node: str | None = "gpu-a100-1", labels: dict | None = None,
        annotations: dict | None = None, scheduled: dict | None = None,
        created: str = "2025-05-01T10:00:00Z") -> dict[str, Any]:
    container = {"name": "app", "ready": phase == "Running", "restartCount": 0,
                 "state": state if state is not None else
                 (running() if phase == "Running" else {}), "lastState": {}}
    status: dict[str, Any] = {"phase": phase, "conditions": [
        scheduled or {"type": "PodScheduled", "status": "True"}]}
    if phase != "Pending" or state is not None:
        status["containerStatuses"] = [container]
    spec: dict[str, Any] = {"containers": [{"name": "app"}]}
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name, "namespace": NS, "creationTimestamp": created,
                         "labels": {"gpu-portal.io/workload-id": "42", **(labels or {})},
                         "annotations": annotations or {}},
            "spec": spec, "status": status}


def rank_pod(rank: int, phase: str = "Running", *, attempt: int = 0, suffix: str = "x1x2x",
             **kwargs) -> dict[str, Any]:
    """A JobSet's pod of rank `rank`: `<jobset>-r-0-<rank>-<5>`, its completion index as the Job
    controller annotates it and JobSet's labels."""
    index = {"batch.kubernetes.io/job-completion-index": str(rank)}
    labels = {"jobset.sigs.k8s.io/jobset-name": NAME, "jobset.sigs.k8s.io/replicatedjob-name": "r",
              "jobset.sigs.k8s.io/restart-attempt": str(attempt), "jobset.sigs.k8s.io/job-index": "0",
              **index}
    kwargs.setdefault("node", f"gpu-a100-{rank + 1}")
    return pod(f"{NAME}-r-0-{rank}-{suffix}", phase, labels=labels, annotations=index, **kwargs)


def worker(index: int, phase: str = "Running", **kwargs) -> dict[str, Any]:
    labels = {"training.kubeflow.org/operator-name": "mpi-operator",
              "training.kubeflow.org/job-name": NAME, "training.kubeflow.org/job-role": "worker",
              "training.kubeflow.org/replica-index": str(index)}
    kwargs.setdefault("node", f"gpu-a100-{index + 1}")
    return pod(f"{NAME}-worker-{index}", phase, labels=labels, **kwargs)


def launcher(phase: str = "Running", *, suffix: str = "q7w8e", **kwargs) -> dict[str, Any]:
    labels = {"training.kubeflow.org/operator-name": "mpi-operator",
              "training.kubeflow.org/job-name": NAME, "training.kubeflow.org/job-role": "launcher"}
    kwargs.setdefault("node", "cpu-1")
    return pod(f"{NAME}-launcher-{suffix}", phase, labels=labels, **kwargs)


def group(obj, *pods, events=()) -> Observed:
    return Observed(kind="batch", group=obj, pods=pods, events=events)


UNSCHEDULED = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
               "message": UNSCHEDULABLE}
PULL_ERROR = {"waiting": {"reason": "ImagePullBackOff",
                          "message": 'Back-off pulling image "nvcr.io/nvidia/pytorch:24.99"'}}
KUEUE_PENDING = {"involvedObject": {"kind": "Workload", "name": f"jobset-{NAME}-5f1e2"},
                 "reason": "Pending", "type": "Normal",
                 "message": "couldn't assign flavors to pod set r: insufficient unused quota "
                            "for nvidia.com/gpu in flavor a100, 8 more needed",
                 "lastTimestamp": "2025-05-01T10:00:01Z"}

CASES = [
    # (what, current, observed, state, reason)
    ("suspended: Kueue has not admitted the group", S.PENDING,
     group(jobset(suspend=True)), S.QUEUED, "Waiting in the tenant's queue for GPUs."),
    ("suspended, with Kueue's word on its Workload", S.QUEUED,
     group(jobset(suspend=True), events=[KUEUE_PENDING]), S.QUEUED,
     "Waiting in the tenant's queue: couldn't assign flavors to pod set r: insufficient unused "
     "quota for nvidia.com/gpu in flavor a100, 8 more needed"),
    ("admitted, no pod yet", S.QUEUED, group(jobset()), S.PENDING,
     "0 of 2 ranks running; rank 0: Waiting for its pod to be created."),
    ("one rank running, the other unschedulable", S.PENDING,
     group(jobset(), rank_pod(0), rank_pod(1, "Pending", node=None, scheduled=UNSCHEDULED)),
     S.PENDING, f"1 of 2 ranks running; rank 1: {UNSCHEDULABLE}"),
    ("one rank cannot pull its image", S.PENDING,
     group(jobset(nodes=4), rank_pod(0), rank_pod(1), rank_pod(2, "Pending", state=PULL_ERROR),
           rank_pod(3)),
     S.PENDING, '3 of 4 ranks running; rank 2: ImagePullBackOff: Back-off pulling image '
                '"nvcr.io/nvidia/pytorch:24.99"'),
    ("every rank running", S.PENDING, group(jobset(), rank_pod(0), rank_pod(1)), S.RUNNING, ""),
    ("a rank failed, restarts remain: the group restarts", S.RUNNING,
     group(jobset(max_restarts=2), rank_pod(0),
           rank_pod(1, "Failed", state=terminated(3))),
     S.PENDING, "rank 1 exited with code 3 (Error); the group restarts, attempt 2 of 3."),
    ("restarted: the failed attempt's pods are left out", S.PENDING,
     group(jobset(max_restarts=2, restarts=1),
           rank_pod(1, "Failed", state=terminated(3)),
           rank_pod(0, attempt=1, suffix="n3w00"),
           rank_pod(1, "Pending", attempt=1, suffix="n3w01", node=None, scheduled=UNSCHEDULED)),
     S.PENDING, f"1 of 2 ranks running; rank 1: {UNSCHEDULABLE} (attempt 2 of 3)"),
    ("the first to fail is named, not the rank torn down after it", S.RUNNING,
     group(jobset(), rank_pod(0, "Failed", state=terminated(137, "2025-05-01T10:01:09Z")),
           rank_pod(1, "Failed", state=terminated(3, "2025-05-01T10:01:05Z"))),
     S.RUNNING, "rank 1 exited with code 3 (Error); waiting for the group's verdict."),
    ("failed for good: the rank and why", S.RUNNING,
     group(jobset(max_restarts=1, restarts=1, conditions=[condition(
         "Failed", reason="ReachedMaxRestarts",
         message="jobset failed due to reaching max number of restarts")]),
         rank_pod(0, attempt=1), rank_pod(1, "Failed", attempt=1, state=terminated(3))),
     S.FAILED, "rank 1 exited with code 3 (Error); the group failed after 2 attempts (jobset "
               "failed due to reaching max number of restarts)."),
    ("completed", S.RUNNING,
     group(jobset(conditions=[condition("Completed", reason="AllJobsCompleted",
                                        message="jobset completed successfully")]),
           rank_pod(0, "Succeeded", state=terminated(0)),
           rank_pod(1, "Succeeded", state=terminated(0))),
     S.SUCCEEDED, "Completed."),
    # MPI: the workers first, then the launcher once every worker is ready
    ("MPI: suspended", S.PENDING, group(mpijob(suspend=True)), S.QUEUED,
     "Waiting in the tenant's queue for GPUs."),
    ("MPI: workers running, the launcher not made yet", S.PENDING,
     group(mpijob(), worker(0), worker(1)), S.PENDING,
     "2 of 2 ranks running; the launcher: Waiting for its pod to be created."),
    ("MPI: a worker unschedulable", S.PENDING,
     group(mpijob(), worker(0), worker(1, "Pending", node=None, scheduled=UNSCHEDULED)),
     S.PENDING, f"1 of 2 ranks running; rank 1: {UNSCHEDULABLE}"),
    ("MPI: launcher and workers running", S.PENDING,
     group(mpijob(conditions=[condition("Running", reason="MPIJobRunning")]),
           worker(0), worker(1), launcher()),
     S.RUNNING, ""),
    ("MPI: the launcher failed, its Job retries it", S.RUNNING,
     group(mpijob(backoff_limit=1, launcher_failed=1), worker(0), worker(1),
           launcher("Failed", state=terminated(1))),
     S.PENDING, "the launcher exited with code 1 (Error); the launcher runs again, attempt 2 "
                "of 2."),
    ("MPI: failed", S.RUNNING,
     group(mpijob(launcher_failed=1, conditions=[condition(
         "Failed", reason="BackoffLimitExceeded/Error",
         message="Job has reached the specified backoff limit: ")]),
         worker(0), worker(1), launcher("Failed", state=terminated(2))),
     S.FAILED, "the launcher exited with code 2 (Error); the group failed (Job has reached "
               "the specified backoff limit)."),
    ("MPI: succeeded", S.RUNNING,
     group(mpijob(completion="2025-05-01T10:03:00Z", conditions=[condition(
         "Succeeded", reason="MPIJobSucceeded", message=f"MPIJob {NS}/{NAME} successfully "
                                                        "completed.")]),
         launcher("Succeeded", state=terminated(0))),
     S.SUCCEEDED, "Completed."),
]


@pytest.mark.parametrize(("current", "observed", "state", "reason"),
                         [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_group_states(current, observed, state, reason):
    outcome = workload_outcome(current, observed)
    assert outcome is not None
    assert (outcome.state, outcome.reason) == (state, reason)


def test_a_final_group_stays_final_and_stopping_waits_for_every_object():
    late = group(jobset(), rank_pod(0), rank_pod(1))
    assert workload_outcome(S.FAILED, late) is None
    assert workload_outcome(S.STOPPING, late) is None  # the JobSet is still there
    assert workload_outcome(S.STOPPING, group(None)).state == S.STOPPED


def test_facts_of_a_group():
    failed = workload_outcome(S.RUNNING, CASES[9][2])
    assert failed is not None
    assert (failed.fields["exit_code"], failed.fields["node"]) == (3, "gpu-a100-2")
    assert failed.fields["finished_at"].isoformat() == "2025-05-01T10:10:00+00:00"
    ran = workload_outcome(S.PENDING, group(
        jobset(), rank_pod(0, state=running("2025-05-01T10:00:05Z")),
        rank_pod(1, state=running("2025-05-01T10:00:09Z"))))
    assert ran is not None
    # running since the last rank started, shown on rank 0's node
    assert (ran.fields["node"], ran.fields["started_at"].isoformat()) == (
        "gpu-a100-1", "2025-05-01T10:00:09+00:00")
    done = workload_outcome(S.RUNNING, CASES[-1][2])
    assert done is not None
    assert (done.fields["exit_code"], done.fields["finished_at"].isoformat()) == (
        0, "2025-05-01T10:03:00+00:00")


RANKS_CASES = [
    ("a JobSet's ranks by completion index, a missing one pending",
     group(jobset(nodes=3), rank_pod(2, "Failed", state=terminated(3)), rank_pod(0)),
     [{"rank": 0, "role": "worker", "pod": f"{NAME}-r-0-0-x1x2x", "node": "gpu-a100-1",
       "state": "running", "reason": "", "exit_code": None},
      {"rank": 1, "role": "worker", "pod": "", "node": "", "state": "pending",
       "reason": "Waiting for its pod to be created.", "exit_code": None},
      {"rank": 2, "role": "worker", "pod": f"{NAME}-r-0-2-x1x2x", "node": "gpu-a100-3",
       "state": "failed", "reason": "The container exited with code 3 (Error).",
       "exit_code": 3}]),
    ("an MPIJob's workers by replica index, the launcher last",
     group(mpijob(), launcher("Pending", node=None, scheduled=UNSCHEDULED), worker(1),
           worker(0)),
     [{"rank": 0, "role": "worker", "pod": f"{NAME}-worker-0", "node": "gpu-a100-1",
       "state": "running", "reason": "", "exit_code": None},
      {"rank": 1, "role": "worker", "pod": f"{NAME}-worker-1", "node": "gpu-a100-2",
       "state": "running", "reason": "", "exit_code": None},
      {"rank": None, "role": "launcher", "pod": f"{NAME}-launcher-q7w8e", "node": "",
       "state": "pending", "reason": UNSCHEDULABLE, "exit_code": None}]),
    ("the newest launcher attempt speaks",
     group(mpijob(workers=1), worker(0),
           launcher("Failed", state=terminated(1)),
           launcher("Running", suffix="a2b3c", created="2025-05-01T10:02:00Z")),
     [{"rank": 0, "role": "worker", "pod": f"{NAME}-worker-0", "node": "gpu-a100-1",
       "state": "running", "reason": "", "exit_code": None},
      {"rank": None, "role": "launcher", "pod": f"{NAME}-launcher-a2b3c", "node": "cpu-1",
       "state": "running", "reason": "", "exit_code": None}]),
    ("one pod: no ranks", Observed(kind="batch", pods=[pod(f"{NAME}-abcde")]), []),
]


@pytest.mark.parametrize(("observed", "ranks"), [case[1:] for case in RANKS_CASES],
                         ids=[case[0] for case in RANKS_CASES])
def test_group_ranks(observed, ranks):
    assert group_ranks(observed) == ranks
