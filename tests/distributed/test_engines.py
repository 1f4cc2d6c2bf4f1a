"""The engines of distributed training on the real control plane (stack/k8s/jobset.py,
stack/k8s/mpi_operator.py) and Kueue admitting their groups whole (stack/k8s/kueue.py).

Raw objects, as an operator would apply them, in a namespace with the Pod Security level of the
tenants' (restricted) and a LocalQueue of a ClusterQueue of its own: a JobSet and an MPIJob
each become one Kueue Workload, admitted whole, run and succeed; a group that does not fit waits
suspended without a pod; one that cannot start whole is evicted and requeued (waitForPodsReady);
and a cluster without Kueue serves neither kind (the portal's "distributed unavailable").

The demo inventory has two A100 nodes of 8 GPUs each (gputype=a100, tainted nvidia.com/gpu).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.distributed import (
    JOBSET,
    LOCAL_QUEUE,
    MPIJOB,
    QUEUE_LABEL,
    Queue,
    condition,
    launcher_succeeded,
)
from tests.support.waiting import eventually

pytestmark = [pytest.mark.realcluster, pytest.mark.timeout(300)]

RESTRICTED = {"runAsNonRoot": True, "runAsUser": 1000, "allowPrivilegeEscalation": False,
              "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}}


@pytest.fixture
def queue(kueue_cluster) -> Iterator[Queue]:
    with kueue_cluster.api_client() as api:
        made = Queue(api, gpus=6)
        try:
            yield made
        finally:
            made.delete()


def pod_template(gpus: int, *, run_seconds: int = 5, image: str = "busybox:1.36",
                 labels: dict | None = None) -> dict:
    """A restricted-compliant pod on an A100 node asking for `gpus` GPUs (none: anywhere)."""
    resources = {"cpu": "1", "memory": "1Gi", **({"nvidia.com/gpu": str(gpus)} if gpus else {})}
    placement: dict = {"nodeSelector": {"gputype": "a100"}, "tolerations": [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]} if gpus else {}
    return {
        "metadata": {"annotations": {"kubesim.io/run-seconds": str(run_seconds)},
                     "labels": labels or {}},
        "spec": {
            "restartPolicy": "Never", **placement,
            "securityContext": {"runAsNonRoot": True,
                                "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{"name": "train", "image": image, "command": ["sleep", "3600"],
                            "securityContext": RESTRICTED,
                            "resources": {"requests": resources, "limits": dict(resources)}}]}}


def jobset(name: str, replicated: dict[str, dict]) -> dict:
    """A queued JobSet: for each replicated job (name → pod template), one Job of 2 pods."""
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"name": name, "labels": {QUEUE_LABEL: LOCAL_QUEUE}},
        "spec": {"replicatedJobs": [
            {"name": job, "replicas": 1, "template": {"spec": {
                "parallelism": 2, "completions": 2, "backoffLimit": 0, "template": template}}}
            for job, template in replicated.items()]}}


def running(queue: Queue, selector: str, count: int) -> list:
    pods = queue.pods(selector)
    assert len(pods) == count and all(p.status.phase == "Running" for p in pods), \
        [(p.metadata.name, p.status.phase) for p in pods]
    return pods


def test_a_jobset_is_one_workload_admitted_whole_and_completes(queue):
    created = queue.create(JOBSET, jobset("train", {"workers": pod_template(2)}))
    workload = queue.workload_of(created)
    assert [(p["name"], p["count"]) for p in workload["spec"]["podSets"]] == [("workers", 2)]
    eventually(lambda: condition(queue.workload_of(created), "Admitted") == "True", timeout=30,
               message="the JobSet's Workload admitted")
    pods = eventually(lambda: running(queue, "jobset.sigs.k8s.io/jobset-name=train", 2),
                      timeout=30, message="both pods Running")
    nodes = {queue.core.read_node(p.spec.node_name).metadata.labels["gputype"] for p in pods}
    assert nodes == {"a100"}
    assert sorted(p.metadata.labels["batch.kubernetes.io/job-completion-index"]
                  for p in pods) == ["0", "1"]
    eventually(lambda: condition(queue.get(JOBSET, "train"), "Completed") == "True",
               timeout=60, message="the JobSet Completed")
    # Kueue marks its Workload finished once it has seen the JobSet complete: a moment later
    # (a CI run read it at the very moment of the completion, not yet set)
    eventually(lambda: condition(queue.workload_of(created), "Finished") == "True",
               timeout=30, message="the JobSet's Workload Finished")


def test_an_mpijob_is_one_workload_admitted_whole_and_succeeds(queue):
    launcher = pod_template(0, run_seconds=3)
    launcher["spec"]["restartPolicy"] = "OnFailure"
    launcher["spec"]["containers"][0]["command"] = ["mpirun", "-np", "8", "train"]
    worker = pod_template(2)
    worker["spec"]["containers"][0]["command"] = ["/usr/sbin/sshd", "-De"]
    created = queue.create(MPIJOB, {
        "apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
        "metadata": {"name": "allreduce", "labels": {QUEUE_LABEL: LOCAL_QUEUE}},
        "spec": {"slotsPerWorker": 4, "runPolicy": {"cleanPodPolicy": "Running"},
                 "mpiReplicaSpecs": {
                     "Launcher": {"replicas": 1, "template": launcher},
                     "Worker": {"replicas": 2, "restartPolicy": "Never",
                                "template": worker}}}})
    workload = queue.workload_of(created)
    assert sorted((p["name"], p["count"]) for p in workload["spec"]["podSets"]) == \
        [("launcher", 1), ("worker", 2)]
    eventually(lambda: condition(queue.workload_of(created), "Admitted") == "True", timeout=30,
               message="the MPIJob's Workload admitted")
    # the operator's pods are admitted under `restricted`: the workers, made from the template
    workers = eventually(lambda: running(
        queue, "training.kubeflow.org/job-name=allreduce,training.kubeflow.org/job-role=worker",
        2), timeout=30, message="both workers Running")
    assert sorted(p.metadata.name for p in workers) == ["allreduce-worker-0",
                                                        "allreduce-worker-1"]
    eventually(lambda: launcher_succeeded(queue.get(MPIJOB, "allreduce")), timeout=60,
               message="the MPIJob Succeeded, its launcher with it")
    # Kueue marks its Workload finished once it has seen the MPIJob's end: a moment later
    eventually(lambda: condition(queue.workload_of(created), "Finished") == "True", timeout=30,
               message="the MPIJob's Workload finished")


def test_a_group_that_does_not_fit_waits_suspended_without_a_pod(queue):
    """Quota 6: the first takes 4; the second (2 × 2) would find 2 free, enough for one of its
    pods, and starts none until the first is done; a third (2 × 4 = 8) is more than the
    quota and is never admitted."""
    queue.create(JOBSET, jobset("first", {"w": pod_template(2, run_seconds=8)}))
    second = queue.create(JOBSET, jobset("second", {"w": pod_template(2)}))
    third = queue.create(JOBSET, jobset("third", {"w": pod_template(4)}))
    eventually(lambda: running(queue, "jobset.sigs.k8s.io/jobset-name=first", 2), timeout=30,
               message="the first JobSet's pods Running")
    for waiting in (second, third):
        workload = eventually(
            lambda w=waiting: condition(wl := queue.workload_of(w), "QuotaReserved") == "False"
            and wl, timeout=30, message="Kueue's verdict on the waiting JobSets")
        assert condition(workload, "Admitted") != "True"
        assert queue.get(JOBSET, waiting["metadata"]["name"])["spec"]["suspend"] is True
        assert queue.pods(f"jobset.sigs.k8s.io/jobset-name={waiting['metadata']['name']}") == []
    # why the third waits, in Kueue's words (awaited: a scheduling cycle that handled another
    # Workload first may say it no longer fits, before the next cycle says why)
    eventually(lambda: "couldn't assign flavors" in next(
        c["message"] for c in queue.workload_of(third)["status"]["conditions"]
        if c["type"] == "QuotaReserved"), timeout=30, message="the third's QuotaReserved reason")
    # the first one done, the second starts whole; the third still has no pod
    eventually(lambda: condition(queue.get(JOBSET, "first"), "Completed") == "True",
               timeout=60, message="the first JobSet Completed")
    eventually(lambda: running(queue, "jobset.sigs.k8s.io/jobset-name=second", 2), timeout=30,
               message="the second JobSet's pods Running")
    assert queue.pods("jobset.sigs.k8s.io/jobset-name=third") == []
    assert condition(queue.workload_of(third), "Admitted") != "True"


def test_a_group_that_cannot_start_whole_is_evicted_and_requeued(queue, kueue_cluster):
    """One of its two Jobs has an image that does not exist: admitted, its pods are created,
    two never become Ready; after waitForPodsReady's timeout Kueue evicts the Workload, the
    JobSet is suspended again, its pods deleted, and it is requeued."""
    from stack.k8s.addons import addon

    assert addon(kueue_cluster, "kueue").pods_ready_timeout <= 30
    created = queue.create(JOBSET, jobset("half", {
        "ok": pod_template(1, run_seconds=600),
        "bad": pod_template(1, image="registry.example/does-not-exist:1")}))
    eventually(lambda: running(queue, "jobset.sigs.k8s.io/jobset-name=half,"
                                      "jobset.sigs.k8s.io/replicatedjob-name=ok", 2),
               timeout=30, message="the good half Running")

    def evicted() -> dict:
        workload = queue.workload_of(created)
        evictions = [c for c in workload["status"].get("conditions") or ()
                     if c["type"] == "Evicted" and c["status"] == "True"]
        assert evictions and evictions[0]["reason"] == "PodsReadyTimeout", evictions
        # requeued once, counted on the Workload (awaited with the eviction, not read after it)
        assert (workload["status"].get("requeueState") or {}).get("count") == 1, workload
        return workload

    eventually(evicted, timeout=90, message="evicted for PodsReadyTimeout and requeued once")
    eventually(lambda: queue.get(JOBSET, "half")["spec"]["suspend"] is True, timeout=30,
               message="the JobSet suspended again")
    eventually(lambda: queue.pods("jobset.sigs.k8s.io/jobset-name=half") == [], timeout=30,
               message="its pods deleted")
    # (whether it holds quota again by now depends on how long that took: Kueue admits a
    # requeued Workload again once its back-off has passed)


def test_without_kueue_neither_kind_is_served(real_cluster):
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    with real_cluster.api_client() as api:
        custom = client.CustomObjectsApi(api)
        for group, version, plural in (JOBSET, MPIJOB):
            with pytest.raises(ApiException) as missing:
                custom.list_cluster_custom_object(group, version, plural)
            assert missing.value.status == 404
        groups = {g.name for g in client.ApisApi(api).get_api_versions().groups}
    assert "jobset.x-k8s.io" not in groups and "kubeflow.org" not in groups
    assert "apps" in groups  # the question is answered by a serving API server


def test_the_portals_service_account_manages_jobsets_and_mpijobs(queue, kueue_cluster):
    """deploy/base/portal-rbac.yaml, as the cluster applied it: the portal's own identity
    creates, reads, patches and deletes both kinds, and reads their status; no more."""
    from kubernetes import client, config

    with config.new_client_from_config(str(kueue_cluster.portal_kubeconfig)) as portal:
        reviews = client.AuthorizationV1Api(portal)

        def allowed(group: str, resource: str, verb: str, subresource: str = "") -> bool:
            return reviews.create_self_subject_access_review({"spec": {"resourceAttributes": {
                "group": group, "resource": resource, "subresource": subresource, "verb": verb,
                "namespace": queue.namespace}}}).status.allowed

        for group, _, plural in (JOBSET, MPIJOB):
            for verb in ("create", "get", "list", "watch", "patch", "delete"):
                assert allowed(group, plural, verb), (plural, verb)
            assert allowed(group, plural, "get", "status")
            assert not allowed(group, plural, "update", "status")
        custom = client.CustomObjectsApi(portal)
        custom.create_namespaced_custom_object(*JOBSET[:2], queue.namespace, JOBSET[2],
                                               jobset("mine", {"w": pod_template(1)}))
        custom.patch_namespaced_custom_object(*JOBSET[:2], queue.namespace, JOBSET[2], "mine",
                                              {"metadata": {"labels": {"seen": "yes"}}})
        assert custom.get_namespaced_custom_object_status(
            *JOBSET[:2], queue.namespace, JOBSET[2], "mine")["metadata"]["labels"]["seen"] == "yes"
        custom.delete_namespaced_custom_object(*JOBSET[:2], queue.namespace, JOBSET[2], "mine")
