"""A workload's state from what the cluster shows: pure functions, object dicts in, a decision out.

The tracker (tracking/) gathers the current objects of one workload — its pods, its Job or
Deployment, its Service and its recent events, as the API server returns them — into an
`Observed`, and `workload_outcome(current_state, observed)` says what the workload should become
and why, in the words a researcher needs: the scheduler's message while GPUs do not fit, the
image pull error, the quota refusal, the exit code. No client, no database, no clock: the same
dicts always give the same answer, so the rules are tested as tables of realistic objects.

Rules that are not obvious:
- A final state (succeeded, failed, stopped) is never left: a late or replayed event cannot
  resurrect a finished workload. A batch verdict (succeeded, failed) still takes the facts of
  its pod's end that arrive after it (`later_facts`): the Job's Complete condition and the
  pod's terminated state (its exit code) come on separate watches, in either order.
- `stopping` belongs to the stop task; the only move from it here is to `stopped` once every
  object is gone (the task may have died after deleting them).
- No objects at all is not decided here: whether they vanished or were never created needs the
  database's view of time (tracking/states.py).
- A distributed workload (a JobSet or an MPIJob: `Observed.group`) goes through the same states,
  judged for the group: queued while the group is suspended (Kueue admits it whole), pending
  until every rank runs ("1 of 2 ranks running; rank 1: <the scheduler's words>"), running when
  all run, succeeded or failed as the group's conditions say. A rank that failed while the group
  has restarts left is a restart (pending, naming the rank); the final failure names it too.
  `group_ranks` gives the ranks themselves, each judged by the same rules as a one-pod batch
  workload's pod.
- A service whose container keeps crashing is `failed` only once the crash loop has persisted:
  the container was restarted `CRASH_LOOP_RESTARTS` times and is again in CrashLoopBackOff. The
  kubelet's back-off doubles from 10 s (10+20+40+80+160 s), so that is about five minutes of
  crashing — long enough that a service which crashes once at start-up (a slow dependency) is
  not failed for it, and restart counts need no clock to compare against.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from kube.labels import (
    ADMISSION_GATE,
    MPI_INDEX_LABEL,
    MPI_LAUNCHER,
    MPI_ROLE_LABEL,
    MPI_WORKER,
    QUEUE_LABEL,
)
from kube.multikueue import CONTROLLER as MULTIKUEUE
from tenants.kueue import QUEUED_REASON

from .manifests import BATCH, COMPLETION_INDEX, CONTAINER_NAME, SERVICE
from .models import Workload

State = Workload.State
Obj = dict[str, Any]

CRASH_LOOP_RESTARTS = 5
# what a batch workload's pod tells once it has ended, taken even after the verdict
LATE_FACTS = ("exit_code", "finished_at")
# MetalLB's AllocationFailed when the pool has no address left: "no available IPs" from its
# default pools; from a pool a Service names (metallb.io/address-pool) v0.15.2 says instead
# '["<nil>"] is not allowed in config' (it assigns the nil address its search came back with)
POOL_EXHAUSTED = ("no available IPs", '["<nil>"] is not allowed in config')
PULL_ERRORS = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull")
# waiting reasons that mean the container cannot start as configured (not just "not yet")
CONFIG_ERRORS = ("CreateContainerConfigError", "CreateContainerError", "RunContainerError")


@dataclass(frozen=True)
class Observed:
    """The current objects of one workload, as dicts in their JSON shape."""

    kind: str  # "service" | "batch"
    pods: Sequence[Obj] = ()
    job: Obj | None = None
    deployment: Obj | None = None
    service: Obj | None = None
    ingress: Obj | None = None  # its route through the shared gateway, if it has one
    events: Sequence[Obj] = ()  # Kubernetes events about any of its objects, any order
    group: Obj | None = None  # a distributed workload's JobSet or MPIJob

    @property
    def empty(self) -> bool:
        """No object of the workload exists (events alone do not count)."""
        return not (self.pods or self.job or self.deployment or self.service or self.ingress
                    or self.group)


@dataclass(frozen=True)
class Outcome:
    """What a workload should be: its state, the reason shown to users, and facts learnt on
    the way (`node`, `address`, `exit_code`, `started_at`, `finished_at`). A reason of None
    keeps the one the workload has (a stop's reason survives the move to stopped)."""

    state: str
    reason: str | None
    fields: dict[str, Any] = field(default_factory=dict)


# -- reading objects ---------------------------------------------------------------------------


def parse_time(value: str | None) -> dt.datetime | None:
    """An RFC 3339 timestamp of the API server (`2025-01-02T03:04:05Z`), or None."""
    if not value:
        return None
    try:
        return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def expires_at_for(workload: Workload, started: dt.datetime) -> dt.datetime | None:
    """When a workload that started running at `started` reaches its maximum runtime (None:
    no limit): the runtime counts from when it started running."""
    if not workload.max_runtime_minutes:
        return None
    return started + dt.timedelta(minutes=workload.max_runtime_minutes)


def _conditions(obj: Obj | None) -> dict[str, Obj]:
    """The object's status conditions by type (the last one of a type wins)."""
    if not obj:
        return {}
    return {c.get("type", ""): c for c in (obj.get("status") or {}).get("conditions") or []}


def _true(condition: Obj | None) -> TypeGuard[Obj]:
    return condition is not None and condition.get("status") == "True"


def current_pod(pods: Iterable[Obj]) -> Obj | None:
    """The pod that speaks for the workload: the newest one not being deleted (a Job's latest
    attempt, a Deployment's replacement pod), else the newest of those being deleted."""
    def newest(candidates: list[Obj]) -> Obj | None:
        if not candidates:
            return None
        # RFC 3339 timestamps in one format compare as strings; the name breaks ties
        return max(candidates, key=lambda p: (p["metadata"].get("creationTimestamp") or "",
                                              p["metadata"].get("name") or ""))
    pods = list(pods)
    live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
    return newest(live) or newest(pods)


def app_container(pod: Obj) -> Obj:
    """The status of the workload's container (`app`), or of the first one there is."""
    statuses: list[Obj] = (pod.get("status") or {}).get("containerStatuses") or []
    for status in statuses:
        if status.get("name") == CONTAINER_NAME:
            return status
    return statuses[0] if statuses else {}


def last_termination(container: Obj) -> Obj:
    """The container's terminated state now, else the one before its last restart."""
    terminated: Obj = ((container.get("state") or {}).get("terminated")
                       or (container.get("lastState") or {}).get("terminated") or {})
    return terminated


def service_address(service: Obj | None) -> str:
    """The external address once the load balancer (MetalLB) has assigned one."""
    if not service:
        return ""
    for ingress in ((service.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []:
        address: str = ingress.get("ip") or ingress.get("hostname") or ""
        if address:
            return address
    return ""


def ingress_host(ingress: Obj | None) -> str:
    """The host name the shared gateway routes to the workload (its Ingress' first rule)."""
    for rule in ((ingress or {}).get("spec") or {}).get("rules") or ():
        host: str = rule.get("host") or ""
        if host:
            return host
    return ""


def workload_address(observed: Observed) -> str:
    """Where a service (or a batch job with SSH) is reached: its host name behind the shared
    gateway, else the address its load balancer assigned."""
    if observed.kind != SERVICE and observed.service is None:
        return ""
    return ingress_host(observed.ingress) or service_address(observed.service)


def address_wait(observed: Observed) -> str:
    """Why a running service has no address yet, in the researcher's words: the load
    balancer's newest word on its Service (MetalLB records a Warning AllocationFailed, "no
    available IPs", and assigns an address as soon as one is freed; an IPAllocated after it
    means the address is on its way). Behind the shared gateway (a ClusterIP Service) it is
    its Ingress that is missing."""
    if ((observed.service or {}).get("spec") or {}).get("type") == "ClusterIP":
        return ("Running; its route through the shared gateway (its Ingress) is missing, so it "
                "cannot be reached: stop it and launch it again.")
    service_events = [e for e in observed.events
                      if (e.get("involvedObject") or {}).get("kind") == "Service"
                      and e.get("reason") in ("AllocationFailed", "IPAllocated")]
    if not service_events:
        return "Running; waiting for the load balancer to assign an external address."
    newest = max(service_events, key=_event_time)
    if newest.get("reason") != "AllocationFailed":
        return "Running; waiting for the load balancer to assign an external address."
    message = (newest.get("message") or "").strip()
    if any(words in message for words in POOL_EXHAUSTED):
        return ("Running; waiting for an address: the address pool has none free (the load "
                f"balancer: {message}). It gets one as soon as another service's address is "
                "freed.")
    return f"Running; the load balancer cannot assign it an address: {message}"


def _event_time(event: Obj) -> str:
    return (event.get("lastTimestamp") or event.get("eventTime")
            or event.get("firstTimestamp") or "")


def _newest_event(events: Iterable[Obj], reason: str) -> Obj | None:
    matching = [e for e in events if e.get("reason") == reason]
    if not matching:
        return None
    return max(matching, key=_event_time)


def creation_refusal(observed: Observed) -> str | None:
    """Why the workload's pod could not be created: the Deployment's ReplicaFailure condition
    (copied from its ReplicaSet) or the newest FailedCreate event of the ReplicaSet or Job. A
    quota refusal reads "… is forbidden: exceeded quota: NAME, requested: …"."""
    message = ""
    failure = _conditions(observed.deployment).get("ReplicaFailure")
    if _true(failure):
        message = failure.get("message") or ""
    if not message:
        event = _newest_event(observed.events, "FailedCreate")
        message = (event or {}).get("message") or ""
    if not message:
        return None
    message = message.removeprefix("Error creating: ")
    if "exceeded quota" in message:
        return f"The namespace quota refused its pod: {message}"
    return f"The cluster could not create its pod: {message}"


def queued(observed: Observed, pod: Obj | None) -> bool:
    """Waiting in Kueue's queue: a Job still suspended (Kueue unsuspends it when it admits it,
    and suspends it again when it is preempted), or a service's pod held by Kueue's gate."""
    if observed.kind == BATCH:
        spec = (observed.job or {}).get("spec") or {}
        if spec.get("managedBy") == MULTIKUEUE and pod is not None:
            # dispatched: the manager's Job is unsuspended only after the worker's copy was
            # admitted there, and its pod (the worker's) may run before: it is not waiting
            return False
        return bool(spec.get("suspend"))
    if pod is None:
        # its pod is not there yet; when it comes, Kueue holds it until it admits it
        labels = ((observed.deployment or {}).get("metadata") or {}).get("labels") or {}
        return QUEUE_LABEL in labels
    gates = (pod.get("spec") or {}).get("schedulingGates") or []
    return any(gate.get("name") == ADMISSION_GATE for gate in gates)


def queue_reason(observed: Observed) -> str:
    """Kueue's newest word on the workload (the events of its Kueue Workload): why it waits,
    or that it was preempted and is back in the queue."""
    kueue = [e for e in observed.events
             if (e.get("involvedObject") or {}).get("kind") == "Workload"]
    if not kueue:
        return QUEUED_REASON
    newest = max(kueue, key=_event_time)
    reason, message = newest.get("reason") or "", (newest.get("message") or "").strip()
    if "Preempt" in reason or "Evict" in reason:
        return f"Preempted, back in the queue: {message}" if message else \
            "Preempted, back in the queue."
    if reason == "Pending" and message:
        return f"Waiting in the tenant's queue: {message}"
    return QUEUED_REASON


# -- deciding ----------------------------------------------------------------------------------


def _exit_facts(pod: Obj | None) -> dict[str, Any]:
    """node, exit code and start/finish times a pod tells."""
    if pod is None:
        return {}
    facts: dict[str, Any] = {}
    node = (pod.get("spec") or {}).get("nodeName")
    if node:
        facts["node"] = node
    container = app_container(pod)
    state = container.get("state") or {}
    terminated = last_termination(container)
    if "exitCode" in terminated:
        facts["exit_code"] = int(terminated["exitCode"])
    started = parse_time((state.get("running") or {}).get("startedAt")
                         or terminated.get("startedAt"))
    if started:
        facts["started_at"] = started
    finished = parse_time((state.get("terminated") or {}).get("finishedAt"))
    if finished:
        facts["finished_at"] = finished
    return facts


def _exit_text(pod: Obj | None) -> str:
    if pod is None:
        return ""
    terminated = last_termination(app_container(pod))
    if "exitCode" not in terminated:
        return ""
    why = terminated.get("reason") or ("Completed" if terminated["exitCode"] == 0 else "Error")
    return f"The container exited with code {terminated['exitCode']} ({why})."


def _job_verdict(job: Obj, pod: Obj | None) -> Outcome | None:
    """Succeeded or failed, as the Job's conditions say. Since Kubernetes 1.31 the Job first
    gets SuccessCriteriaMet / FailureTarget: the outcome is decided then, and Complete /
    Failed follow once its pods are gone, so either of each pair is the verdict."""
    conditions = _conditions(job)
    facts = _exit_facts(pod)
    for kind in ("Complete", "SuccessCriteriaMet"):
        if _true(conditions.get(kind)):
            finished = parse_time((job.get("status") or {}).get("completionTime"))
            if finished:
                facts["finished_at"] = finished
            return Outcome(State.SUCCEEDED, "Completed.", facts)
    for kind in ("Failed", "FailureTarget"):
        condition = conditions.get(kind)
        if _true(condition):
            message = condition.get("message") or condition.get("reason") or "The Job failed."
            if condition.get("reason") == "DeadlineExceeded":
                text = f"It reached its maximum runtime: {message}."
            else:
                text = " ".join(part for part in (_exit_text(pod), f"{message}.") if part)
            return Outcome(State.FAILED, text, facts)
    return None


def _batch_pod_ended(observed: Observed, pod: Obj, current: str) -> Outcome | None:
    """A batch pod that ended before the Job recorded its verdict (the Job's condition follows
    within moments; the pod's phase is the earlier signal)."""
    phase = (pod.get("status") or {}).get("phase")
    facts = _exit_facts(pod)
    if phase == "Succeeded":
        # one completion, one pod at a time (manifests.make_job): its success is the Job's
        return Outcome(State.SUCCEEDED, "Completed.", facts)
    if phase != "Failed":
        return None
    job = observed.job
    if job is None:
        return Outcome(State.FAILED, _exit_text(pod) or "Its pod failed.", facts)
    limit = int((job.get("spec") or {}).get("backoffLimit", 6))  # the API's default if unset
    # the Job controller may not have counted this pod yet
    failed = max(int((job.get("status") or {}).get("failed") or 0),
                 sum(1 for p in observed.pods if (p.get("status") or {}).get("phase") == "Failed"))
    if failed <= limit:
        return Outcome(State.PENDING, f"{_exit_text(pod)} The Job retries it "
                                      f"(attempt {failed + 1} of {limit + 1}).", facts)
    # out of retries: the Job's Failed condition, with its own message, is a moment away
    state = State.RUNNING if current == State.RUNNING else State.PENDING
    return Outcome(state, f"{_exit_text(pod)} Waiting for the Job's verdict.", facts)


def _waiting(pod: Obj, container: Obj, current: str) -> Outcome | None:
    """A container that is not running: image pull, crash loop, configuration errors."""
    waiting = (container.get("state") or {}).get("waiting") or {}
    reason, message = waiting.get("reason") or "", waiting.get("message") or ""
    facts = _exit_facts(pod)
    if reason in PULL_ERRORS or reason in CONFIG_ERRORS:
        return Outcome(State.PENDING, f"{reason}: {message}" if message else reason, facts)
    if reason == "CrashLoopBackOff":
        restarts = int(container.get("restartCount") or 0)
        exited = _exit_text(pod) or "The container exited."
        if restarts >= CRASH_LOOP_RESTARTS:
            return Outcome(State.FAILED, f"It keeps crashing: {exited} It was restarted "
                                         f"{restarts} times (CrashLoopBackOff).", facts)
        # still within the allowance: it stays where it is, saying why it is not serving
        state = State.RUNNING if current == State.RUNNING else State.PENDING
        return Outcome(state, f"Restarting: {exited} Restart {restarts} of "
                              f"{CRASH_LOOP_RESTARTS} before it counts as failed.", facts)
    return None


def _sidecar_waiting(pod: Obj, current: str) -> Outcome | None:
    """A container beside the application (a service's authenticating proxy) that cannot
    start: the pod never gets Ready, so say which container and why. A workload already
    running stays running (its address answers once the proxy is back)."""
    statuses: list[Obj] = (pod.get("status") or {}).get("containerStatuses") or []
    for status in statuses:
        if status.get("name") == CONTAINER_NAME:
            continue
        waiting = (status.get("state") or {}).get("waiting") or {}
        reason, message = waiting.get("reason") or "", waiting.get("message") or ""
        if reason in PULL_ERRORS or reason in CONFIG_ERRORS or reason == "CrashLoopBackOff":
            text = f"{reason}: {message}" if message else reason
            state = State.RUNNING if current == State.RUNNING else State.PENDING
            return Outcome(state, f"Its {status.get('name')} container (the login in front of "
                                  f"it) cannot start: {text}", _exit_facts(pod))
    return None


def derive(observed: Observed, current: str = State.PENDING) -> Outcome | None:
    """The state the objects show, ignoring the rules about where a workload may go from
    `current` (see `workload_outcome`). None when there is nothing to go on."""
    if observed.empty:
        return None
    if observed.group is not None:
        return _group_outcome(observed, current)
    pod = current_pod(observed.pods)
    address = workload_address(observed)

    def outcome(state: str, reason: str, facts: dict[str, Any] | None = None) -> Outcome:
        facts = dict(facts or {})
        if address:
            facts["address"] = address
        return Outcome(state, reason, facts)

    if observed.kind == BATCH and observed.job is not None:
        verdict = _job_verdict(observed.job, pod)
        if verdict is not None:
            return verdict
    if queued(observed, pod):
        return outcome(State.QUEUED, queue_reason(observed))
    if pod is None:
        refusal = creation_refusal(observed)
        if refusal:
            return outcome(State.PENDING, refusal)
        return outcome(State.PENDING, "Waiting for its pod to be created.")

    status = pod.get("status") or {}
    phase = status.get("phase") or "Pending"
    container = app_container(pod)
    facts = _exit_facts(pod)
    node = facts.get("node", "")

    if observed.kind == BATCH and phase in ("Succeeded", "Failed"):
        ended = _batch_pod_ended(observed, pod, current)
        if ended is not None:
            return ended
    waiting = _waiting(pod, container, current) or _sidecar_waiting(pod, current)
    if waiting is not None:
        return outcome(waiting.state, waiting.reason or "", waiting.fields)

    if phase == "Running":
        if observed.kind == BATCH:
            return outcome(State.RUNNING, "", facts)
        if _true(_conditions(pod).get("Ready")):
            reason = "" if address else address_wait(observed)
            return outcome(State.RUNNING, reason, facts)
        # started, not answering on its port yet (readiness probe)
        state = State.RUNNING if current == State.RUNNING else State.PENDING
        return outcome(state, f"Started on {node}; waiting until it is ready.", facts)

    if phase == "Failed":  # a service pod evicted or failed as a whole
        message = status.get("message") or status.get("reason") or "Its pod failed."
        return outcome(State.PENDING, f"Its pod failed ({message}); it is being replaced.",
                       facts)
    # Pending: not scheduled yet, or scheduled and starting
    scheduled = _conditions(pod).get("PodScheduled")
    if scheduled and scheduled.get("status") == "False":
        # the scheduler's own words: "0/7 nodes are available: 3 Insufficient nvidia.com/gpu…"
        return outcome(State.PENDING, scheduled.get("message") or
                       "Waiting for a node with free GPUs.", facts)
    if not node:
        return outcome(State.PENDING, "Waiting for the scheduler.", facts)
    return outcome(State.PENDING, f"Starting on {node}.", facts)


# -- distributed groups (a JobSet or an MPIJob) -------------------------------------------------

# what JobSet (sigs.k8s.io/jobset v0.12.0) labels its pods with: which restart of the whole
# set they belong to (status.restarts when their Job was made)
JOBSET_RESTART_LABEL = "jobset.sigs.k8s.io/restart-attempt"


def _labels(obj: Obj) -> dict[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def _group_size(group: Obj) -> int:
    """How many ranks (workers) the group has: a JobSet's indexed pods, an MPIJob's workers."""
    spec = group.get("spec") or {}
    if group.get("kind") == "MPIJob":
        worker = (spec.get("mpiReplicaSpecs") or {}).get("Worker") or {}
        return int(worker.get("replicas") or 0)
    total = 0
    for replicated in spec.get("replicatedJobs") or ():
        job_spec = (replicated.get("template") or {}).get("spec") or {}
        per_job = job_spec.get("completions") or job_spec.get("parallelism") or 1
        total += int(replicated.get("replicas") or 1) * int(per_job)
    return total


def _pod_rank(pod: Obj, kind: str) -> int | None:
    """A worker pod's rank: its completion index (JobSet), its replica index (MPI)."""
    meta = pod.get("metadata") or {}
    if kind == "MPIJob":
        value = _labels(pod).get(MPI_INDEX_LABEL, "")
    else:
        value = ((meta.get("annotations") or {}).get(COMPLETION_INDEX)
                 or _labels(pod).get(COMPLETION_INDEX, ""))
    return int(value) if str(value).isdigit() else None


def pod_rank(pod: Obj) -> int | str | None:
    """Which rank a group's pod runs, from what its controller labels it with: a JobSet pod's
    completion index, an MPI worker's replica index, "launcher"; None for another pod."""
    if _labels(pod).get(MPI_ROLE_LABEL) == MPI_LAUNCHER:
        return MPI_LAUNCHER
    return _pod_rank(pod, "MPIJob" if MPI_ROLE_LABEL in _labels(pod) else "JobSet")


def _group_pods(observed: Observed) -> dict[int | None, list[Obj]]:
    """The group's pods of its current attempt by rank (None: the MPI launcher). A JobSet's
    pods of an earlier attempt (being deleted by its restart) are left out."""
    group = observed.group or {}
    kind = group.get("kind") or "JobSet"
    restarts = str(int((group.get("status") or {}).get("restarts") or 0))
    by_rank: dict[int | None, list[Obj]] = {}
    for pod in observed.pods:
        labels = _labels(pod)
        if kind == "JobSet" and labels.get(JOBSET_RESTART_LABEL, restarts) != restarts:
            continue
        if kind == "MPIJob" and labels.get(MPI_ROLE_LABEL) == MPI_LAUNCHER:
            by_rank.setdefault(None, []).append(pod)
            continue
        rank = _pod_rank(pod, kind)
        if rank is not None:
            by_rank.setdefault(rank, []).append(pod)
    return by_rank


def _rank_entry(rank: int | None, pod: Obj | None, observed: Observed) -> dict[str, Any]:
    """One rank as the one-pod rules judge its pod (a batch pod of no Job of its own)."""
    role = MPI_LAUNCHER if rank is None else MPI_WORKER
    if pod is None:
        refusal = creation_refusal(dataclasses.replace(observed, group=None, job=None))
        return {"rank": rank, "role": role, "pod": "", "node": "", "state": State.PENDING,
                "reason": refusal or "Waiting for its pod to be created.", "exit_code": None}
    judged = derive(Observed(kind=BATCH, pods=(pod,))) or Outcome(State.PENDING, "")
    return {"rank": rank, "role": role, "pod": (pod.get("metadata") or {}).get("name") or "",
            "node": judged.fields.get("node", ""), "state": judged.state,
            "reason": judged.reason or "", "exit_code": judged.fields.get("exit_code")}


def group_ranks(observed: Observed) -> list[dict[str, Any]]:
    """A distributed workload's ranks: {rank, role ("worker" | "launcher"), pod, node, state,
    reason, exit_code}, by rank, an MPIJob's launcher last (rank None). A rank whose pod is not
    there yet is pending, saying why. [] for a one-pod workload."""
    group = observed.group
    if group is None:
        return []
    by_rank = _group_pods(observed)
    ranks = set(range(_group_size(group))) | {r for r in by_rank if r is not None}
    entries = [_rank_entry(rank, current_pod(by_rank.get(rank, ())), observed)
               for rank in sorted(ranks)]
    if group.get("kind") == "MPIJob":
        entries.append(_rank_entry(None, current_pod(by_rank.get(None, ())), observed))
    return entries


def _rank_name(entry: dict[str, Any]) -> str:
    return "the launcher" if entry["role"] == MPI_LAUNCHER else f"rank {entry['rank']}"


def _rank_pod(observed: Observed, entry: dict[str, Any]) -> Obj | None:
    return next((p for p in observed.pods
                 if (p.get("metadata") or {}).get("name") == entry["pod"]), None)


def _rank_failure(observed: Observed, entry: dict[str, Any]) -> str:
    """"rank 1 exited with code 3 (Error)", or why its pod failed without an exit code."""
    pod = _rank_pod(observed, entry)
    terminated = last_termination(app_container(pod)) if pod else {}
    if "exitCode" in terminated:
        why = terminated.get("reason") or ("Completed" if terminated["exitCode"] == 0
                                           else "Error")
        return f"{_rank_name(entry)} exited with code {terminated['exitCode']} ({why})"
    status = (pod or {}).get("status") or {}
    why = status.get("message") or status.get("reason") or entry["reason"] or "its pod failed"
    return f"{_rank_name(entry)} failed: {why.rstrip('.')}"


def _first_failed(observed: Observed, ranks: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The rank that failed first (the others may fail after it, as the group is torn down)."""
    failed = [r for r in ranks if r["state"] == State.FAILED]

    def finished(entry: dict[str, Any]) -> str:
        pod = _rank_pod(observed, entry)
        return last_termination(app_container(pod)).get("finishedAt") or "~" if pod else "~"

    return min(failed, key=lambda r: (finished(r), r["rank"] is None, r["rank"] or 0),
               default=None)


def _group_attempts(observed: Observed) -> tuple[int, int]:
    """(this attempt, how many it may have), from 1: a JobSet restarts whole up to
    failurePolicy.maxRestarts times; an MPIJob's launcher Job retries its launcher up to
    runPolicy.backoffLimit times."""
    group = observed.group or {}
    spec, status = group.get("spec") or {}, group.get("status") or {}
    if group.get("kind") == "MPIJob":
        limit = int((spec.get("runPolicy") or {}).get("backoffLimit") or 0)
        launcher = (status.get("replicaStatuses") or {}).get("Launcher") or {}
        # one launcher pod per attempt (its Job's pods are kept: restartPolicy Never)
        tried = sum(1 for p in observed.pods if _labels(p).get(MPI_ROLE_LABEL) == MPI_LAUNCHER)
        return max(tried, int(launcher.get("failed") or 0), 1), limit + 1
    limit = int((spec.get("failurePolicy") or {}).get("maxRestarts") or 0)
    return int(status.get("restarts") or 0) + 1, limit + 1


def _group_suspended(group: Obj) -> bool:
    """Waiting in Kueue's queue: created suspended, unsuspended when Kueue admits the group
    whole, suspended again when it is preempted."""
    spec = group.get("spec") or {}
    if group.get("kind") == "MPIJob":
        return bool((spec.get("runPolicy") or {}).get("suspend"))
    return bool(spec.get("suspend"))


def _speaker(ranks: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The rank whose exit code a group that succeeded shows: the MPI launcher (the program
    under mpirun), else rank 0."""
    launcher = [r for r in ranks if r["role"] == MPI_LAUNCHER]
    return (launcher or ranks)[0] if ranks else None


def _group_verdict(observed: Observed, ranks: list[dict[str, Any]]) -> Outcome | None:
    """Succeeded or failed as the group's conditions say: a JobSet's Completed / Failed, an
    MPIJob's Succeeded / Failed. A failure names the rank that failed first."""
    group = observed.group or {}
    conditions = _conditions(group)
    status = group.get("status") or {}
    facts: dict[str, Any] = {}
    speaker = _speaker(ranks)
    success = conditions.get("Succeeded" if group.get("kind") == "MPIJob" else "Completed")
    failure = conditions.get("Failed")
    decided = success if _true(success) else failure if _true(failure) else None
    if decided is None:
        return None
    finished = parse_time(status.get("completionTime") or decided.get("lastTransitionTime"))
    if finished:
        facts["finished_at"] = finished
    if decided is success:
        if speaker and speaker["exit_code"] is not None:
            facts["exit_code"] = speaker["exit_code"]
        if ranks and ranks[0]["node"]:
            facts["node"] = ranks[0]["node"]  # rank 0's (the launcher, last, holds no GPU)
        return Outcome(State.SUCCEEDED, "Completed.", facts)
    # the MPI operator appends ": <the launcher pod's message>", which may be empty
    message = (decided.get("message") or decided.get("reason") or "").strip().rstrip(".:").strip()
    failed = _first_failed(observed, ranks)
    if failed is None:
        return Outcome(State.FAILED, f"The group failed: {message}." if message else
                       "The group failed.", facts)
    if failed["exit_code"] is not None:
        facts["exit_code"] = failed["exit_code"]
    if failed["node"]:
        facts["node"] = failed["node"]
    attempt, _ = _group_attempts(observed)
    tried = f" after {attempt} attempts" if attempt > 1 else ""
    return Outcome(State.FAILED, f"{_rank_failure(observed, failed)}; the group "
                                 f"failed{tried} ({message}).", facts)


def _group_outcome(observed: Observed, current: str) -> Outcome:
    """A distributed workload's state, judged for the whole group (see the module's rules)."""
    ranks = group_ranks(observed)
    verdict = _group_verdict(observed, ranks)
    if verdict is not None:
        return verdict
    group = observed.group or {}
    if _group_suspended(group):
        return Outcome(State.QUEUED, queue_reason(observed))
    attempt, attempts = _group_attempts(observed)
    failed = _first_failed(observed, ranks)
    if failed is not None:
        facts = {k: failed[k] for k in ("node", "exit_code") if failed[k] not in ("", None)}
        what = _rank_failure(observed, failed)
        if attempt < attempts:
            again = ("the launcher runs again" if group.get("kind") == "MPIJob"
                     else "the group restarts")
            return Outcome(State.PENDING, f"{what}; {again}, attempt "
                                          f"{attempt + 1} of {attempts}.", facts)
        # out of restarts: the group's Failed condition, with its own message, is a moment away
        state = State.RUNNING if current == State.RUNNING else State.PENDING
        return Outcome(state, f"{what}; waiting for the group's verdict.", facts)
    workers = [r for r in ranks if r["role"] == MPI_WORKER]
    waiting = [r for r in ranks if r["state"] != State.RUNNING]
    facts = {"node": ranks[0]["node"]} if ranks and ranks[0]["node"] else {}
    if not waiting:
        starts = [started for r in ranks
                  if (started := _exit_facts(_rank_pod(observed, r)).get("started_at"))]
        if starts:
            facts["started_at"] = max(starts)
        return Outcome(State.RUNNING, "", facts)
    ready = sum(1 for r in workers if r["state"] == State.RUNNING)
    first = waiting[0]
    text = (f"{ready} of {len(workers)} ranks running; {_rank_name(first)}: "
            f"{first['reason'] or first['state']}")
    if attempt > 1:
        text += f" (attempt {attempt} of {attempts})"
    return Outcome(State.PENDING, text, facts)


def later_facts(observed: Observed) -> dict[str, Any]:
    """The exit code and finish time of a batch workload's pod whose container has ended
    (empty while it has not): what its verdict may have been decided without."""
    if observed.kind != BATCH or observed.group is not None:
        return {}  # a group's verdict carries the facts of the rank that speaks for it
    pod = current_pod(observed.pods)
    if pod is None or not (app_container(pod).get("state") or {}).get("terminated"):
        return {}
    return {k: v for k, v in _exit_facts(pod).items() if k in LATE_FACTS}


def workload_outcome(current: str, observed: Observed) -> Outcome | None:
    """What the workload should become from `current`, or None to leave it as it is. From a
    batch verdict: the same state with the facts of its pod's end (the caller writes only
    those the workload lacks)."""
    if current in Workload.FINAL_STATES:
        # never backwards out of a final state; a verdict takes the facts that come after it
        facts = later_facts(observed) if current in (State.SUCCEEDED, State.FAILED) else {}
        return Outcome(current, None, facts) if facts else None
    if current == State.STOPPING:
        # the stop task owns it; once everything is gone it is stopped, whoever finished
        return Outcome(State.STOPPED, None) if observed.empty else None
    return derive(observed, current)
