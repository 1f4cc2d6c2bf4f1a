"""The Job controller: pods, conditions, status counts and events."""

from __future__ import annotations

from tests.conformance import manifests as m
from tests.conformance.cluster import Cluster, events_for, eventually


def finished(cluster: Cluster, ns: str, name: str, timeout: float = 40) -> dict:
    def check() -> dict | None:
        job = cluster.request("GET", f"/apis/batch/v1/namespaces/{ns}/jobs/{name}").json()
        types = {c["type"] for c in (job.get("status") or {}).get("conditions") or []}
        return job if types & {"Complete", "Failed"} else None

    return eventually(check, timeout=timeout, what=f"job {name} finished")


def brief(conditions: list[dict]) -> list[tuple[str, str, str, str]]:
    return [(c["type"], c["status"], c.get("reason", ""), c.get("message", ""))
            for c in conditions]


def test_job_pod_is_labelled_and_owned(cluster: Cluster, ns: str):
    job = cluster.batch.create_namespaced_job(ns, m.job("train", run_seconds=30))
    uid = job.metadata.uid
    assert job.spec.selector.match_labels == {"batch.kubernetes.io/controller-uid": uid}
    pod = eventually(lambda: next(iter(cluster.core.list_namespaced_pod(ns).items), None),
                     what="job pod")
    assert pod.metadata.name.startswith("train-")
    assert pod.metadata.generate_name == "train-"
    assert pod.metadata.labels["batch.kubernetes.io/job-name"] == "train"
    assert pod.metadata.labels["job-name"] == "train"
    assert pod.metadata.labels["batch.kubernetes.io/controller-uid"] == uid
    assert pod.metadata.labels["controller-uid"] == uid
    [owner] = pod.metadata.owner_references
    assert (owner.kind, owner.name, owner.uid, owner.controller,
            owner.block_owner_deletion) == ("Job", "train", uid, True, True)
    assert pod.metadata.finalizers == ["batch.kubernetes.io/job-tracking"]


def test_job_completes(cluster: Cluster, ns: str):
    cluster.batch.create_namespaced_job(ns, m.job("ok", run_seconds=1))
    job = finished(cluster, ns, "ok")
    status = job["status"]
    assert brief(status["conditions"]) == [
        ("SuccessCriteriaMet", "True", "CompletionsReached",
         "Reached expected number of succeeded pods"),
        ("Complete", "True", "CompletionsReached", "Reached expected number of succeeded pods"),
    ]
    assert status["succeeded"] == 1
    assert not status.get("active") and not status.get("failed")
    assert status["startTime"] <= status["completionTime"]


def test_completed_job_pod(cluster: Cluster, ns: str):
    cluster.batch.create_namespaced_job(ns, m.job("ok", run_seconds=1))
    finished(cluster, ns, "ok")
    [pod] = cluster.request("GET", f"/api/v1/namespaces/{ns}/pods").json()["items"]
    assert pod["status"]["phase"] == "Succeeded"
    terminated = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (0, "Completed")
    # counted: the tracking finalizer is gone
    assert not pod["metadata"].get("finalizers")


def test_job_events(cluster: Cluster, ns: str):
    cluster.batch.create_namespaced_job(ns, m.job("ok", run_seconds=1))
    finished(cluster, ns, "ok")
    pod = cluster.core.list_namespaced_pod(ns).items[0].metadata.name

    def both() -> list | None:
        got = [(e["type"], e["reason"], e["message"]) for e in events_for(cluster, ns, "ok")
               if e["involvedObject"]["kind"] == "Job"]
        return got if len(got) >= 2 else None

    assert eventually(both, what="job events") == [
        ("Normal", "SuccessfulCreate", f"Created pod: {pod}"),
        ("Normal", "Completed", "Job completed"),
    ]


def test_job_fails_after_its_backoff_limit(cluster: Cluster, ns: str):
    cluster.batch.create_namespaced_job(ns, m.job("bad", run_seconds=1, exit_code=3,
                                                  backoff_limit=0))
    job = finished(cluster, ns, "bad")
    status = job["status"]
    message = "Job has reached the specified backoff limit"
    assert brief(status["conditions"]) == [
        ("FailureTarget", "True", "BackoffLimitExceeded", message),
        ("Failed", "True", "BackoffLimitExceeded", message),
    ]
    assert status["failed"] == 1 and not status.get("succeeded")
    assert "completionTime" not in status
    [pod] = cluster.request("GET", f"/api/v1/namespaces/{ns}/pods").json()["items"]
    assert pod["status"]["phase"] == "Failed"
    terminated = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (3, "Error")
    event = eventually(lambda: next((e for e in events_for(cluster, ns, "bad")
                                     if e["reason"] == "BackoffLimitExceeded"), None),
                       what="BackoffLimitExceeded event")
    assert (event["type"], event["message"]) == ("Warning", message)


def test_job_retries_within_its_backoff_limit(cluster: Cluster, ns: str):
    cluster.batch.create_namespaced_job(ns, m.job("flaky", run_seconds=0.5, exit_code=1,
                                                  backoff_limit=1))
    job = finished(cluster, ns, "flaky", timeout=60)
    assert job["status"]["failed"] == 2
    assert [c["type"] for c in job["status"]["conditions"]] == ["FailureTarget", "Failed"]
    assert len(cluster.core.list_namespaced_pod(ns).items) == 2


def test_job_deadline(cluster: Cluster, ns: str):
    cluster.batch.create_namespaced_job(ns, m.job("slow", run_seconds=60, spec_extra={
        "activeDeadlineSeconds": 2}))
    job = finished(cluster, ns, "slow")
    message = "Job was active longer than specified deadline"
    assert brief(job["status"]["conditions"]) == [
        ("FailureTarget", "True", "DeadlineExceeded", message),
        ("Failed", "True", "DeadlineExceeded", message),
    ]
    # its running pod is deleted
    eventually(lambda: not cluster.core.list_namespaced_pod(ns).items, what="pod removed")
