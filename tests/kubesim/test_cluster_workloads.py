"""Deployments, ReplicaSets, Jobs, the kubelet's pod lifecycle and garbage collection, driven
over HTTP with the official client against the shared kubesim (demo inventory)."""

from __future__ import annotations

import ipaddress
import time

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.kubesim.cluster_helpers import (
    DEMO_INVENTORY,
    condition,
    container,
    deployment,
    event_reasons,
    job,
    pod,
    pod_spec,
    status_body,
)
from tests.support.waiting import eventually


def test_deployment_replicaset_pods_running_and_ready(core, apps, kube_namespace):
    ns = kube_namespace
    apps.create_namespaced_deployment(ns, deployment("web", pod_spec(container(cpu="100m")),
                                                     replicas=2))

    def available():
        d = apps.read_namespaced_deployment("web", ns)
        return d if (d.status.available_replicas or 0) == 2 else None

    d = eventually(available, message="waiting for 2 available replicas", ignoring=(ApiException,))
    assert d.status.ready_replicas == 2 and d.status.updated_replicas == 2
    assert d.status.replicas == 2 and d.status.observed_generation == 1
    assert not d.status.unavailable_replicas
    assert condition(d, "Available").status == "True"
    assert condition(d, "Available").reason == "MinimumReplicasAvailable"
    progressing = eventually(lambda: (c := condition(apps.read_namespaced_deployment("web", ns),
                                                     "Progressing")) and
                             c.reason == "NewReplicaSetAvailable" and c,
                             message="waiting for progressed", ignoring=(ApiException,))
    rs_list = apps.list_namespaced_replica_set(ns).items
    assert len(rs_list) == 1
    rs = rs_list[0]
    template_hash = rs.metadata.labels["pod-template-hash"]
    assert rs.metadata.name == f"web-{template_hash}"
    assert progressing.message == f'ReplicaSet "{rs.metadata.name}" has successfully progressed.'
    assert rs.metadata.owner_references[0].kind == "Deployment"
    assert rs.metadata.owner_references[0].controller is True
    assert rs.metadata.annotations["deployment.kubernetes.io/revision"] == "1"
    assert rs.status.ready_replicas == 2 and rs.status.available_replicas == 2

    pods = core.list_namespaced_pod(ns, label_selector="app=web").items
    assert len(pods) == 2
    for p in pods:
        assert p.metadata.name.startswith(f"web-{template_hash}-")
        assert p.metadata.owner_references[0].name == rs.metadata.name
        assert p.status.phase == "Running"
        assert p.spec.node_name in ("cpu-1", "cpu-2")  # GPU nodes are tainted
        types = {c.type: c.status for c in p.status.conditions}
        assert types == {"PodReadyToStartContainers": "True", "Initialized": "True",
                         "Ready": "True", "ContainersReady": "True", "PodScheduled": "True"}
        cs = p.status.container_statuses[0]
        assert cs.name == "app" and cs.ready and cs.started and cs.restart_count == 0
        assert cs.image == "docker.io/library/busybox:1.36"
        assert cs.container_id.startswith("containerd://") and cs.image_id
        assert cs.state.running.started_at is not None
        node = core.read_node(p.spec.node_name)
        assert ipaddress.ip_address(p.status.pod_ip) in ipaddress.ip_network(node.spec.pod_cidr)
        assert p.status.host_ip == node.status.addresses[0].address
        reasons = [r for r, _ in event_reasons(core, ns, p.metadata.name)]
        assert reasons[:1] == ["Scheduled"] and "Started" in reasons
    assert len({p.status.pod_ip for p in pods}) == 2
    rs_events = event_reasons(core, ns, rs.metadata.name)
    assert sorted(m for r, m in rs_events if r == "SuccessfulCreate") == sorted(
        f"Created pod: {p.metadata.name}" for p in pods)
    assert ("ScalingReplicaSet", f"Scaled up replica set {rs.metadata.name} from 0 to 2") in \
        event_reasons(core, ns, "web")


def test_deployment_template_change_rolls_to_a_new_replicaset(core, apps, kube_namespace):
    ns = kube_namespace
    apps.create_namespaced_deployment(ns, deployment("app", pod_spec(container())))
    eventually(lambda: apps.read_namespaced_deployment("app", ns).status.available_replicas,
               message="waiting for first rollout", ignoring=(ApiException,))
    first = apps.list_namespaced_replica_set(ns).items[0].metadata.name
    apps.patch_namespaced_deployment("app", ns, {"spec": {"template": {"spec": {
        "containers": [container(image="busybox:1.37")]}}}})

    def rolled():
        items = {rs.metadata.name: rs for rs in apps.list_namespaced_replica_set(ns).items}
        new = [rs for name, rs in items.items() if name != first]
        if len(items) == 2 and new and new[0].status.ready_replicas == 1 \
                and items[first].spec.replicas == 0 and not items[first].status.replicas:
            return new[0]
        return None

    new = eventually(rolled, message="waiting for new ReplicaSet ready and old scaled to 0",
                     ignoring=(ApiException,))
    assert new.metadata.annotations["deployment.kubernetes.io/revision"] == "2"
    pods = core.list_namespaced_pod(ns).items
    assert [p.spec.containers[0].image for p in pods] == ["busybox:1.37"]
    d = apps.read_namespaced_deployment("app", ns)
    assert d.status.observed_generation == 2
    messages = [m for r, m in event_reasons(core, ns, "app") if r == "ScalingReplicaSet"]
    assert f"Scaled down replica set {first} from 1 to 0" in messages


def test_scaling_a_deployment_down_deletes_pods(core, apps, kube_namespace):
    ns = kube_namespace
    apps.create_namespaced_deployment(ns, deployment("s", pod_spec(container()), replicas=3))
    eventually(lambda: len(core.list_namespaced_pod(ns).items) == 3, message="waiting for 3 pods",
               ignoring=(ApiException,))
    apps.patch_namespaced_deployment("s", ns, {"spec": {"replicas": 1}})
    eventually(lambda: len(core.list_namespaced_pod(ns).items) == 1,
               message="waiting for scaled to 1", ignoring=(ApiException,))
    rs = apps.list_namespaced_replica_set(ns).items[0]
    assert any(r == "SuccessfulDelete" for r, _ in event_reasons(core, ns, rs.metadata.name))


def test_job_runs_to_completion(core, batch, kube_namespace):
    ns = kube_namespace
    batch.create_namespaced_job(ns, job("train", pod_spec(container()), completions=2,
                                        parallelism=1,
                                        annotations={"kubesim.io/run-seconds": "0.2"}))

    def complete():
        j = batch.read_namespaced_job("train", ns)
        return j if condition(j, "Complete") else None

    j = eventually(complete, message="waiting for job complete", ignoring=(ApiException,))
    assert j.status.succeeded == 2 and not j.status.failed and not j.status.active
    assert j.status.start_time is not None and j.status.completion_time is not None
    types = [c.type for c in j.status.conditions]
    assert types == ["SuccessCriteriaMet", "Complete"]
    assert condition(j, "Complete").reason == "CompletionsReached"
    pods = core.list_namespaced_pod(ns, label_selector="job-name=train").items
    assert len(pods) == 2 and {p.status.phase for p in pods} == {"Succeeded"}
    term = pods[0].status.container_statuses[0].state.terminated
    assert term.exit_code == 0 and term.reason == "Completed"
    assert condition(pods[0], "Ready").reason == "PodCompleted"
    events = event_reasons(core, ns, "train")
    assert sorted(m for r, m in events if r == "SuccessfulCreate") == sorted(
        f"Created pod: {p.metadata.name}" for p in pods)
    assert ("Completed", "Job completed") in events


def test_job_fails_after_backoff_limit(core, batch, kube_namespace):
    ns = kube_namespace
    batch.create_namespaced_job(ns, job("bad", pod_spec(container(env={
        "KUBESIM_RUN_SECONDS": "0.1", "KUBESIM_EXIT_CODE": "3"})), backoffLimit=1))

    def failed():
        j = batch.read_namespaced_job("bad", ns)
        return j if condition(j, "Failed") else None

    j = eventually(failed, timeout=15, message="waiting for job failed", ignoring=(ApiException,))
    assert j.status.failed == 2 and not j.status.succeeded
    assert [c.type for c in j.status.conditions] == ["FailureTarget", "Failed"]
    cond = condition(j, "Failed")
    assert cond.reason == "BackoffLimitExceeded"
    assert cond.message == "Job has reached the specified backoff limit"
    assert j.status.completion_time is None
    pods = core.list_namespaced_pod(ns).items
    assert len(pods) == 2 and {p.status.phase for p in pods} == {"Failed"}
    term = pods[0].status.container_statuses[0].state.terminated
    assert term.exit_code == 3 and term.reason == "Error"


def test_job_deadline_exceeded_kills_its_pods(core, batch, kube_namespace):
    ns = kube_namespace
    batch.create_namespaced_job(ns, job("slow", pod_spec(container()), activeDeadlineSeconds=1,
                                        annotations={"kubesim.io/run-seconds": "60"}))
    eventually(lambda: core.list_namespaced_pod(ns).items, message="waiting for the job's pod",
               ignoring=(ApiException,))

    def failed():
        j = batch.read_namespaced_job("slow", ns)
        return j if condition(j, "Failed") else None

    j = eventually(failed, timeout=6, message="waiting for deadline", ignoring=(ApiException,))
    assert condition(j, "Failed").reason == "DeadlineExceeded"
    assert condition(j, "Failed").message == "Job was active longer than specified deadline"
    assert condition(j, "FailureTarget").reason == "DeadlineExceeded"
    eventually(lambda: not core.list_namespaced_pod(ns).items, message="waiting for pods deleted",
               ignoring=(ApiException,))
    assert any(r == "DeadlineExceeded" for r, _ in event_reasons(core, ns, "slow"))


def test_job_ttl_after_finished_deletes_job_and_pods(core, batch, kube_namespace):
    ns = kube_namespace
    batch.create_namespaced_job(ns, job("brief", pod_spec(container()), ttlSecondsAfterFinished=0,
                                        annotations={"kubesim.io/run-seconds": "0.1"}))

    def gone():
        try:
            batch.read_namespaced_job("brief", ns)
        except ApiException as exc:
            return exc.status == 404
        return False

    eventually(gone, message="waiting for job deleted by its TTL", ignoring=(ApiException,))
    eventually(lambda: not core.list_namespaced_pod(ns).items,
               message="waiting for its pods collected", ignoring=(ApiException,))


def test_onfailure_job_restarts_in_place_and_counts_restarts(core, batch, kube_namespace):
    ns = kube_namespace
    batch.create_namespaced_job(ns, job("crash", pod_spec(container(), restart="OnFailure"),
                                        backoffLimit=1,
                                        annotations={"kubesim.io/run-seconds": "0.05",
                                                     "kubesim.io/exit-code": "1"}))
    j = eventually(lambda: (j := batch.read_namespaced_job("crash", ns)) and condition(j, "Failed")
                   and j, timeout=15, message="waiting for failed through restarts",
                   ignoring=(ApiException,))
    assert condition(j, "Failed").reason == "BackoffLimitExceeded"


def test_garbage_collection_background_foreground_orphan(core, apps, kube_namespace):
    ns = kube_namespace
    for name in ("bg", "fg", "orphan"):
        apps.create_namespaced_deployment(ns, deployment(name, pod_spec(container())))
    eventually(lambda: len(core.list_namespaced_pod(ns).items) == 3, message="waiting for 3 pods",
               ignoring=(ApiException,))

    apps.delete_namespaced_deployment("bg", ns, propagation_policy="Background")
    eventually(lambda: not core.list_namespaced_pod(ns, label_selector="app=bg").items
               and not apps.list_namespaced_replica_set(ns, label_selector="app=bg").items,
               message="waiting for background GC of RS and pods", ignoring=(ApiException,))

    apps.delete_namespaced_deployment("fg", ns, propagation_policy="Foreground")
    eventually(lambda: not apps.list_namespaced_replica_set(ns, label_selector="app=fg").items,
               message="waiting for foreground deletion", ignoring=(ApiException,))

    apps.delete_namespaced_deployment("orphan", ns, propagation_policy="Orphan")
    time.sleep(0.3)
    rs = apps.list_namespaced_replica_set(ns, label_selector="app=orphan").items
    assert len(rs) == 1 and not rs[0].metadata.owner_references
    pods = core.list_namespaced_pod(ns, label_selector="app=orphan").items
    assert len(pods) == 1 and pods[0].metadata.owner_references[0].name == rs[0].metadata.name


def test_pod_with_missing_owner_is_collected(core, apps, kube_namespace):
    ns = kube_namespace
    body = pod("stray", pod_spec(container()))
    body["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                            "name": "gone", "uid": "0000-gone"}]
    core.create_namespaced_pod(ns, body)
    eventually(lambda: not core.list_namespaced_pod(ns).items,
               message="waiting for dangling dependent deleted", ignoring=(ApiException,))


def test_deleting_a_running_pod_is_graceful(core, kube_namespace):
    ns = kube_namespace
    core.create_namespaced_pod(ns, pod("p", pod_spec(container())))
    eventually(lambda: core.read_namespaced_pod("p", ns).status.phase == "Running",
               message="waiting for running", ignoring=(ApiException,))
    deleted = core.delete_namespaced_pod("p", ns)
    assert deleted.metadata.deletion_timestamp is not None
    assert deleted.metadata.deletion_grace_period_seconds == 30

    def gone():
        try:
            core.read_namespaced_pod("p", ns)
        except ApiException as exc:
            return exc.status == 404
        return False

    eventually(gone, timeout=5, message="waiting for pod removed after its containers stopped",
               ignoring=(ApiException,))
    assert ("Killing", "Stopping container app") in event_reasons(core, ns, "p")


def test_image_pull_errors(core, kube_namespace):
    ns = kube_namespace
    core.create_namespaced_pod(ns, pod("bad", pod_spec(container(image="nginx:nope"))))

    def reasons():
        found = {r: m for r, m in event_reasons(core, ns, "bad")}
        return found if "BackOff" in found else None

    found = eventually(reasons, message="waiting for image pull back-off events",
                       ignoring=(ApiException,))
    assert found["BackOff"] == 'Back-off pulling image "nginx:nope"'
    messages = [m for r, m in event_reasons(core, ns, "bad") if r == "Failed"]
    assert "Error: ErrImagePull" in messages and "Error: ImagePullBackOff" in messages
    assert any(m.startswith('Failed to pull image "nginx:nope": ') for m in messages)
    p = core.read_namespaced_pod("bad", ns)
    assert p.status.phase == "Pending"
    waiting = p.status.container_statuses[0].state.waiting
    assert waiting.reason in ("ErrImagePull", "ImagePullBackOff")
    if waiting.reason == "ImagePullBackOff":
        assert waiting.message == 'Back-off pulling image "nginx:nope"'
    with pytest.raises(ApiException) as err:
        core.read_namespaced_pod_log("bad", ns)
    assert err.value.status == 400


def test_logs_of_a_waiting_container_are_refused(kubesim_factory):
    # A slow kubelet keeps the container in ContainerCreating long enough to ask.
    server = kubesim_factory(inventory=DEMO_INVENTORY,
                             extra_args=["--container-create-delay", "30"])
    with server.api_client() as api:
        core = client.CoreV1Api(api)
        core.create_namespaced_pod("default", pod("x", pod_spec(container())))
        eventually(lambda: core.read_namespaced_pod("x", "default").status.container_statuses,
                   message="waiting for ContainerCreating", ignoring=(ApiException,))
        with pytest.raises(ApiException) as err:
            core.read_namespaced_pod_log("x", "default")
        assert err.value.status == 400
        assert status_body(err.value)["message"] == (
            'container "app" in pod "x" is waiting to start: ContainerCreating')


def test_restart_from_state_file_keeps_pods_running(kubesim_factory):
    server = kubesim_factory(inventory=DEMO_INVENTORY)
    with server.api_client() as api:
        apps = client.AppsV1Api(api)
        core = client.CoreV1Api(api)
        apps.create_namespaced_deployment("default", deployment(
            "gpu", pod_spec(container(gpus=2), tolerate_gpu=True,
                            node_selector={"gputype": "a100"})))
        eventually(lambda: apps.read_namespaced_deployment("gpu", "default").status
                   .available_replicas, message="waiting for running before the restart",
                   ignoring=(ApiException,))
        before = core.list_namespaced_pod("default").items[0]
    server.stop()
    server.start()
    with server.api_client() as api:
        apps = client.AppsV1Api(api)
        core = client.CoreV1Api(api)
        time.sleep(0.5)
        pods = core.list_namespaced_pod("default").items
        assert [p.metadata.uid for p in pods] == [before.metadata.uid]
        after = pods[0]
        assert after.status.phase == "Running" and after.status.pod_ip == before.status.pod_ip
        assert after.status.container_statuses[0].ready
        assert after.status.container_statuses[0].state.running.started_at == \
            before.status.container_statuses[0].state.running.started_at
        # The GPUs it held are held again: a second pod gets different ones.
        core.create_namespaced_pod("default", pod("more", pod_spec(
            container(gpus=6), tolerate_gpu=True,
            node_selector={"kubernetes.io/hostname": before.spec.node_name})))
        eventually(lambda: core.read_namespaced_pod("more", "default").status.phase == "Running",
                   message="waiting for the second pod on the same node", ignoring=(ApiException,))
        core.create_namespaced_pod("default", pod("no-room", pod_spec(
            container(gpus=1), tolerate_gpu=True,
            node_selector={"kubernetes.io/hostname": before.spec.node_name})))
        eventually(lambda: (c := core.read_namespaced_pod("no-room", "default").status.conditions)
                   and c[0].reason == "Unschedulable", message="waiting for the node is full",
                   ignoring=(ApiException,))


def test_a_pod_being_deleted_when_kubesim_stopped_is_removed_after_the_restart(kubesim_factory):
    """A pod marked for deletion (its containers stopping) when kubesim was stopped is not
    left terminating forever by the restarted one (its GPUs counted in the namespace's quota)."""
    # a slow kubelet: the containers take 3 s to stop, time enough to stop kubesim first
    server = kubesim_factory(inventory=DEMO_INVENTORY,
                             extra_args=["--container-create-delay", "3"])
    with server.api_client() as api:
        core = client.CoreV1Api(api)
        core.create_namespaced_pod("default", pod("p", pod_spec(
            container(gpus=1), tolerate_gpu=True, node_selector={"gputype": "a100"})))
        eventually(lambda: core.read_namespaced_pod("p", "default").status.phase == "Running",
                   timeout=15, message="waiting for running", ignoring=(ApiException,))
        assert core.delete_namespaced_pod("p", "default").metadata.deletion_timestamp
    server.stop()
    server.start()
    with server.api_client() as api:
        core = client.CoreV1Api(api)

        def gone() -> bool:
            try:
                core.read_namespaced_pod("p", "default")
            except ApiException as exc:
                return exc.status == 404
            return False

        eventually(gone, timeout=10, message="the pod marked for deletion before the restart "
                                             "is still there", ignoring=(ApiException,))
