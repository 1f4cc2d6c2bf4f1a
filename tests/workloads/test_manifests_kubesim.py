"""The workload objects, created over HTTP with the official client against kubesim: the
server accepts them, schedules the pods onto the right GPU nodes past the GPU taint, and they
run: a Jupyter-like service with its authenticating proxy becomes Ready behind a LoadBalancer
address, a batch Job completes.
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client, utils

from access.proxy import PROXY_CONTAINER, PROXY_PORT
from kube.labels import workload_object_name
from storage.manifests import ClaimSpec, make_volume_claim
from tests.support.manifests import PROXY_SECRETS, proxy_for
from tests.support.waiting import eventually
from workloads.manifests import (
    SERVICE_ACCOUNT_NAME,
    WorkloadSpec,
    workload_objects,
)

WAIT_SECONDS = 30.0


@pytest.fixture
def api(kubesim, kube_namespace):
    with kubesim.api_client() as api_client:
        client.CoreV1Api(api_client).create_namespaced_service_account(
            kube_namespace,
            {"metadata": {"name": SERVICE_ACCOUNT_NAME}, "automountServiceAccountToken": False},
        )
        yield api_client


def create_all(api_client: client.ApiClient, objects: list[dict[str, Any]]) -> None:
    for obj in objects:
        utils.create_from_dict(api_client, obj, namespace=obj["metadata"]["namespace"])


def pod_of(core: client.CoreV1Api, namespace: str, workload_id: int) -> client.V1Pod | None:
    pods = core.list_namespaced_pod(
        namespace, label_selector=f"gpu-portal.io/workload-id={workload_id}").items
    return pods[0] if len(pods) == 1 else None


def is_ready(pod: client.V1Pod) -> bool:
    conditions = pod.status.conditions or []
    return pod.status.phase == "Running" and any(
        c.type == "Ready" and c.status == "True" for c in conditions)


def test_a_service_on_an_a100_runs_ready_behind_a_load_balancer(api, kube_namespace):
    workload_id = 9001
    name = workload_object_name(workload_id, "My Notebook")
    spec = WorkloadSpec(
        workload_id=workload_id,
        name=name,
        namespace=kube_namespace,
        project_id="d964ebf8619749c3",
        owner="researcher",
        owner_id="5e1f0c6b2a",
        template="jupyter",
        kind="service",
        image="quay.io/jupyter/pytorch-notebook:cuda12-2024-06-17",
        args=("start-notebook.py", "--ServerApp.root_dir=/home/portal"),
        secret_env=(("JUPYTER_TOKEN", "f" * 32),),
        port=8888,
        node_selector=(("gputype", "a100"),),
        cpu="2",
        memory="8Gi",
        run_as_user=1000,
        home_claim="gpu-portal-home",
        lb_address_pool="default",
        proxy=proxy_for(name, 8888, "JUPYTER_TOKEN"),
        secret_data=PROXY_SECRETS,
    )
    core = client.CoreV1Api(api)
    create_all(api, [make_volume_claim(ClaimSpec(
        volume_id=1, name="gpu-portal-home", namespace=kube_namespace, project_id="p1",
        owner_id="u1", size_gib=10))])
    create_all(api, workload_objects(spec))

    pod = eventually(lambda: (p := pod_of(core, kube_namespace, workload_id)) and is_ready(p) and p,
                     timeout=WAIT_SECONDS, message="the notebook pod is not Running and Ready")
    node = core.read_node(pod.spec.node_name)
    assert node.metadata.labels["gputype"] == "a100"
    assert pod.spec.containers[0].resources.limits["nvidia.com/gpu"] == "1"
    assert pod.metadata.labels["gpu-portal.io/exposed"] == "true"
    # the token reached the pod by reference only
    env = {e.name: e for e in pod.spec.containers[0].env}
    assert env["JUPYTER_TOKEN"].value is None
    assert env["JUPYTER_TOKEN"].value_from.secret_key_ref.name == spec.name
    # the proxy beside it, both ready; the Service leads to the proxy's port
    assert [c.name for c in pod.spec.containers] == ["app", PROXY_CONTAINER]
    assert all(s.ready for s in pod.status.container_statuses)
    assert [(p.name, p.container_port) for p in pod.spec.containers[1].ports] == \
        [("http", PROXY_PORT)]
    assert core.read_namespaced_service(spec.name, kube_namespace).spec.ports[0].target_port \
        == "http"

    def ingress():
        status = core.read_namespaced_service(spec.name, kube_namespace).status
        return status.load_balancer.ingress if status.load_balancer else None

    (address,) = eventually(ingress, timeout=WAIT_SECONDS, message="no LoadBalancer address")
    assert address.ip.startswith("192.168.1.")

    deployment = client.AppsV1Api(api).read_namespaced_deployment(spec.name, kube_namespace)
    eventually(lambda: client.AppsV1Api(api).read_namespaced_deployment_status(
                   spec.name, kube_namespace).status.ready_replicas == 1,
               timeout=WAIT_SECONDS, message="the Deployment does not report its replica ready")
    assert deployment.spec.strategy.type == "Recreate"


def test_a_batch_job_on_a_v100_completes(api, kube_namespace):
    workload_id = 9002
    spec = WorkloadSpec(
        workload_id=workload_id,
        name=workload_object_name(workload_id, "train résnet; $(id)"),
        namespace=kube_namespace,
        project_id="d964ebf8619749c3",
        owner="researcher",
        owner_id="5e1f0c6b2a",
        template="custom",
        kind="batch",
        image="nvcr.io/nvidia/pytorch:24.01-py3",
        command=("python", "-c", "print('héllo \"world\"')"),
        node_selector=(("gputype", "v100"),),
        cpu="2",
        memory="8Gi",
        max_runtime_seconds=600,
        pod_annotations=(("kubesim.io/run-seconds", "1"),),
    )
    create_all(api, workload_objects(spec))
    batch = client.BatchV1Api(api)
    core = client.CoreV1Api(api)

    def complete():
        conditions = batch.read_namespaced_job_status(spec.name, kube_namespace).status.conditions
        return any(c.type == "Complete" and c.status == "True" for c in conditions or [])

    eventually(complete, timeout=WAIT_SECONDS, message="the Job did not complete")
    job = batch.read_namespaced_job(spec.name, kube_namespace)
    assert job.status.succeeded == 1
    assert not job.status.failed
    pod = pod_of(core, kube_namespace, workload_id)
    assert pod is not None and pod.status.phase == "Succeeded"
    assert core.read_node(pod.spec.node_name).metadata.labels["gputype"] == "v100"
    assert pod.spec.containers[0].command == ["python", "-c", "print('héllo \"world\"')"]
