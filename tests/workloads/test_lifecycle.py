"""Workload states from cluster objects: tables of realistic dicts (shapes as the real API server sends them)."""

from __future__ import annotations

import datetime as dt

import pytest

from tests.support.lifecycle import (
    BACKOFF,
    COMPLETE,
    DEADLINE,
    NAME,
    NODE,
    NS,
    UNSCHEDULABLE,
    batch,
    cluster_ip_service,
    deployment,
    event,
    job,
    pod,
    running,
    svc,
    terminated,
    unscheduled,
    waiting,
    with_proxy,
)
from workloads.lifecycle import (
    CRASH_LOOP_RESTARTS,
    Observed,
    current_pod,
    derive,
    workload_outcome,
)
from workloads.models import Workload

S = Workload.State
QUOTA = ('pods "wl-42-train-x2x9k" is forbidden: exceeded quota: gpu-portal-quota, requested: '
         "requests.nvidia.com/gpu=2, used: requests.nvidia.com/gpu=0, limited: "
         "requests.nvidia.com/gpu=1")


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


def test_a_dispatched_jobs_pod_on_the_worker_runs_while_the_managers_job_is_suspended():
    """MultiKueue unsuspends the manager's Job only once the worker admitted its copy; the
    worker's pod may run first, and the workload is running then, not queued."""
    suspended = {**job(), "spec": {"suspend": True, "managedBy": "kueue.x-k8s.io/multikueue"}}
    outcome = derive(batch(pod("Running", state=running()), job_obj=suspended))
    assert outcome is not None and outcome.state == S.RUNNING
    # no pod yet: waiting in the queue, as a Job at home
    outcome = derive(batch(job_obj=suspended))
    assert outcome is not None and outcome.state == S.QUEUED
    at_home = {**job(), "spec": {"suspend": True}}
    outcome = derive(batch(pod("Running", state=running()), job_obj=at_home))
    assert outcome is not None and outcome.state == S.QUEUED
