"""Job controller: runs pods to `completions`, `parallelism` at a time, within the limits.

- success: `succeeded >= completions` (or, without completions, any success) →
  SuccessCriteriaMet then Complete (reason CompletionsReached), completionTime, event Completed;
- failure: failed pods (plus container restarts under restartPolicy OnFailure) beyond
  `backoffLimit` → FailureTarget then Failed, reason BackoffLimitExceeded; running longer than
  `activeDeadlineSeconds` → DeadlineExceeded; active pods are deleted;
- `ttlSecondsAfterFinished`: the finished Job is deleted (with its pods) after that long.
Failed pods are replaced after the real back-off (10 s doubling, capped at 6 min), scaled by
`container_create_delay` like the kubelet's back-offs.

Pods carry the finalizer `batch.kubernetes.io/job-tracking`, as the real controller's do: it
is lifted once a finished pod is counted, and from pods being deleted or left without their
Job, so that a pod's end is never lost before it is counted.
"""

from __future__ import annotations

import calendar
import time
from typing import TYPE_CHECKING

from kubesim.cluster import controller_of, set_condition
from kubesim.controllers.common import condition, is_active, is_ready, omit_zero
from kubesim.controllers.replicasets import pod_from_template
from kubesim.errors import ApiError
from kubesim.resources import Obj, by_kind
from kubesim.scheduler import is_terminal
from kubesim.store import clone
from kubesim.workqueue import coalesce_delay

if TYPE_CHECKING:
    from kubesim.cluster import Cluster

JOB = by_kind("Job")
POD = by_kind("Pod")
COMPONENT = "job-controller"
BACKOFF_LIMIT_MESSAGE = "Job has reached the specified backoff limit"
DEADLINE_MESSAGE = "Job was active longer than specified deadline"
COMPLETIONS_MESSAGE = "Reached expected number of succeeded pods"
TRACKING = "batch.kubernetes.io/job-tracking"

Key = tuple[str, str]


def _rfc3339(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


def _parse(ts: str | None) -> float | None:
    if not ts:
        return None
    try:
        return float(calendar.timegm(time.strptime(ts, "%Y-%m-%dT%H:%M:%SZ")))
    except ValueError:
        return None


def finished_condition(job: Obj) -> Obj | None:
    for type_ in ("Complete", "Failed"):
        cond = condition(job.get("status") or {}, type_)
        if cond is not None and cond.get("status") == "True":
            return cond
    return None


class JobController:
    def __init__(self, cluster: Cluster):
        self.cluster = cluster
        self.queue = cluster.make_queue("jobs", self.reconcile)
        self.scale = max(0.01, cluster.config.container_create_delay)
        # Pods already counted in a Job's status, so a deleted finished pod is not forgotten
        # and is never counted twice: job uid -> pod uid -> "succeeded" | "failed".
        self.counted: dict[str, dict[str, str]] = {}
        self.last_failure: dict[str, float] = {}  # job uid -> loop time of the newest failure
        self.create_errors: dict[Key, int] = {}
        self.sizes: dict[Key, int] = {}  # pods per Job at its last reconcile
        # Exact start times (status.startTime has whole seconds; deadlines want better).
        self.started: dict[str, float] = {}
        # pods whose tracking finalizer goes without counting: being deleted, or orphaned
        self.releases = cluster.make_queue("job-pod-finalizers", self._release)

    def on_job(self, event: str, job: Obj) -> None:
        key = (job["metadata"]["namespace"], job["metadata"]["name"])
        if event == "DELETED":
            self.queue.forget(key)
            self.counted.pop(job["metadata"]["uid"], None)
            self.last_failure.pop(job["metadata"]["uid"], None)
            self.started.pop(job["metadata"]["uid"], None)
            self.create_errors.pop(key, None)
            self.sizes.pop(key, None)
        else:
            self.queue.add(key)

    def on_pod(self, event: str, pod: Obj) -> None:
        ref = controller_of(pod)
        if ref is not None and ref.get("kind") == "Job":
            meta = pod["metadata"]
            key = (meta["namespace"], ref.get("name", ""))
            self.queue.add_after(key, coalesce_delay(self.sizes.get(key, 0)))
            if event != "DELETED" and TRACKING in (meta.get("finalizers") or ()):
                if meta.get("deletionTimestamp"):
                    # let a running pod finish its graceful stop first: lifting the last
                    # finalizer of a pod marked for deletion removes it
                    if (is_terminal(pod) or not (pod.get("spec") or {}).get("nodeName")
                            or not meta.get("deletionGracePeriodSeconds")):
                        self.releases.add((meta["namespace"], meta["name"]))
                elif self._orphaned(meta["namespace"], ref):
                    self.releases.add((meta["namespace"], meta["name"]))

    def _orphaned(self, namespace: str, ref: Obj) -> bool:
        job = self.cluster.peek(JOB, namespace, ref.get("name", ""))
        return (job is None or job["metadata"]["uid"] != ref.get("uid")
                or bool(job["metadata"].get("deletionTimestamp")))

    def _release(self, key: Key) -> None:
        pod = self.cluster.peek(POD, *key)
        if pod is not None:
            self._untrack(pod)

    def _untrack(self, pod: Obj) -> None:
        """Lift the tracking finalizer (a pod being deleted then goes)."""
        finalizers = pod["metadata"].get("finalizers") or []
        if TRACKING not in finalizers:
            return
        new = clone(pod)
        kept = [f for f in finalizers if f != TRACKING]
        if kept:
            new["metadata"]["finalizers"] = kept
        else:
            new["metadata"].pop("finalizers", None)
        try:
            self.cluster.store.update(POD, new, check_rv=False)
        except ApiError as exc:
            if exc.code != 404:
                raise

    def retry_namespace(self, namespace: str) -> None:
        for key in list(self.create_errors):
            if key[0] == namespace:
                self.queue.add(key)

    def _pods(self, job: Obj) -> list[Obj]:
        pods = []
        for _, ns, name in self.cluster.index.owned(job["metadata"]["uid"], POD):
            pod = self.cluster.peek(POD, ns, name)
            if pod is not None:
                pods.append(pod)
        return pods

    def reconcile(self, key: Key) -> None:
        job = self.cluster.peek(JOB, *key)
        if job is None or job["metadata"].get("deletionTimestamp"):
            return
        uid = job["metadata"]["uid"]
        spec = job.get("spec") or {}
        status = clone(job.get("status") or {})
        done = finished_condition(job)
        if done is not None:
            self._expire(job, done)
            return
        now_wall = time.time()
        if not status.get("startTime") and not spec.get("suspend"):
            status["startTime"] = _rfc3339(now_wall)
            self.started[uid] = now_wall
        pods = self._pods(job)
        self.sizes[key] = len(pods)
        counted = self.counted.setdefault(uid, {})
        if not counted and (status.get("succeeded") or status.get("failed")):
            # After a restart of kubesim: what the status counts is what the pods were.
            for pod in pods:
                phase = (pod.get("status") or {}).get("phase")
                if phase in ("Succeeded", "Failed"):
                    counted[pod["metadata"]["uid"]] = phase.lower()
        succeeded = int(status.get("succeeded") or 0)
        failed = int(status.get("failed") or 0)
        for pod in pods:
            phase = (pod.get("status") or {}).get("phase")
            pod_uid = pod["metadata"]["uid"]
            if phase in ("Succeeded", "Failed") and pod_uid not in counted:
                counted[pod_uid] = phase.lower()
                if phase == "Succeeded":
                    succeeded += 1
                else:
                    failed += 1
                    self.last_failure[uid] = self.cluster.now()
        for pod in pods:  # counted: their end is in the status from now on
            if pod["metadata"]["uid"] in counted:
                self._untrack(pod)
        active = [p for p in pods if is_active(p)]
        restarts = 0
        if (spec.get("template") or {}).get("spec", {}).get("restartPolicy") == "OnFailure":
            restarts = sum(int(cs.get("restartCount") or 0) for p in active
                           for cs in (p.get("status") or {}).get("containerStatuses") or ())
        completions = spec.get("completions")
        parallelism = int(spec.get("parallelism", 1))
        backoff_limit = int(spec.get("backoffLimit", 6))
        deadline = spec.get("activeDeadlineSeconds")
        started = self.started.get(uid) or _parse(status.get("startTime"))

        failure: tuple[str, str] | None = None
        if failed + restarts > backoff_limit:
            failure = ("BackoffLimitExceeded", BACKOFF_LIMIT_MESSAGE)
        elif deadline is not None and started is not None and now_wall - started >= int(deadline):
            failure = ("DeadlineExceeded", DEADLINE_MESSAGE)
        success = (succeeded >= int(completions) if completions is not None
                   else succeeded > 0 and not active)
        if failure is not None:
            self._delete_pods(job, active)
            active = []
            reason, message = failure
            set_condition(status, {"type": "FailureTarget", "status": "True", "reason": reason,
                                   "message": message})
            set_condition(status, {"type": "Failed", "status": "True", "reason": reason,
                                   "message": message})
            self.cluster.record_event(job, "Warning", reason, message, COMPONENT)
        elif success:
            if completions is None:
                self._delete_pods(job, active)
                active = []
            set_condition(status, {"type": "SuccessCriteriaMet", "status": "True",
                                   "reason": "CompletionsReached", "message": COMPLETIONS_MESSAGE})
            set_condition(status, {"type": "Complete", "status": "True",
                                   "reason": "CompletionsReached", "message": COMPLETIONS_MESSAGE})
            status["completionTime"] = _rfc3339(now_wall)
            self.cluster.record_event(job, "Normal", "Completed", "Job completed", COMPONENT)
        elif not spec.get("suspend"):
            active = self._manage(job, key, active, succeeded, failed, completions, parallelism)
            if deadline is not None and started is not None:
                self.queue.add_after(key, max(0.0, started + int(deadline) - now_wall) + 0.01)
        status.update({
            "active": len(active),
            "succeeded": succeeded,
            "failed": failed,
            "ready": sum(1 for p in active if is_ready(p)),
            "terminating": 0,
        })
        status.setdefault("uncountedTerminatedPods", {})
        omit_zero(status, "active", "succeeded", "failed")
        self.cluster.write_status(JOB, job, status)
        if failure is not None or success:
            job = self.cluster.peek(JOB, *key)
            if job is not None and (done := finished_condition(job)) is not None:
                self._expire(job, done)

    def _manage(self, job: Obj, key: Key, active: list[Obj], succeeded: int, failed: int,
                completions: int | None, parallelism: int) -> list[Obj]:
        if completions is not None:
            want = min(parallelism, int(completions) - succeeded)
        else:
            want = parallelism if succeeded == 0 else 0
        if len(active) > want:
            surplus = sorted(active, key=lambda p: p["metadata"].get("creationTimestamp", ""))
            self._delete_pods(job, surplus[want:])
            return surplus[:want]
        if len(active) == want:
            return active
        uid = job["metadata"]["uid"]
        if failed and uid in self.last_failure:
            # Re-create failed pods only after the back-off since the newest failure.
            backoff = min(360.0, 10.0 * 2 ** (failed - 1)) * self.scale
            wait = self.last_failure[uid] + backoff - self.cluster.now()
            if wait > 0:
                self.queue.add_after(key, wait)
                return active
        error = None
        for _ in range(want - len(active)):
            pod = pod_from_template(job, (job.get("spec") or {}).get("template") or {},
                                    f"{job['metadata']['name']}-")
            pod["metadata"]["finalizers"] = [*pod["metadata"].get("finalizers", []), TRACKING]
            try:
                created = self.cluster.store.create(POD, pod)
            except ApiError as exc:
                error = exc
                break
            active.append(created)
            self.cluster.record_event(job, "Normal", "SuccessfulCreate",
                                      f"Created pod: {created['metadata']['name']}", COMPONENT)
        if error is not None:
            self.cluster.record_event(job, "Warning", "FailedCreate",
                                      f"Error creating: {error.message}", COMPONENT)
            n = self.create_errors.get(key, 0) + 1
            self.create_errors[key] = n
            self.queue.add_after(key, min(30.0, 0.5 * 2 ** min(n, 6)))
        else:
            self.create_errors.pop(key, None)
        return active

    def _delete_pods(self, job: Obj, pods: list[Obj]) -> None:
        for pod in pods:
            try:
                self.cluster.store.delete(POD, pod["metadata"]["namespace"],
                                          pod["metadata"]["name"])
            except ApiError as exc:
                if exc.code != 404:
                    raise
                continue
            self.cluster.record_event(job, "Normal", "SuccessfulDelete",
                                      f"Deleted pod: {pod['metadata']['name']}", COMPONENT)

    def _expire(self, job: Obj, done: Obj) -> None:
        """ttlSecondsAfterFinished: delete the Job (and, through GC, its pods) when due."""
        ttl = (job.get("spec") or {}).get("ttlSecondsAfterFinished")
        if ttl is None:
            return
        status = job.get("status") or {}
        finished = _parse(status.get("completionTime")) or _parse(done.get("lastTransitionTime"))
        key = (job["metadata"]["namespace"], job["metadata"]["name"])
        wait = (finished or time.time()) + int(ttl) - time.time()
        if wait > 0:
            self.queue.add_after(key, wait)
            return
        try:
            self.cluster.store.delete(JOB, key[0], key[1], propagation="Foreground")
        except ApiError as exc:
            if exc.code != 404:
                raise
