"""The workload objects as pure functions: exact dicts, and valid against the Kubernetes schema."""

import base64
import copy
import dataclasses

import kubernetes_validate
import pytest

from portal.workloads.manifests import (
    HOME_MOUNT_PATH,
    WorkloadSpec,
    labels,
    make_deployment,
    make_home_claim,
    make_job,
    make_pod_template,
    make_secret,
    make_service,
    workload_objects,
)

JUPYTER = WorkloadSpec(
    workload_id=42,
    name="wl-42-my-notebook",
    namespace="gpu-vision-lab-abc123",
    project_id="d964ebf8619749c3",
    owner="researcher",
    owner_id="5e1f0c6b2a",
    template="jupyter",
    kind="service",
    image="quay.io/jupyter/pytorch-notebook:cuda12-2024-06-17",
    args=("start-notebook.py", f"--ServerApp.root_dir={HOME_MOUNT_PATH}"),
    env=(("JUPYTER_ENABLE_LAB", "yes"),),
    secret_env=(("JUPYTER_TOKEN", "0123456789abcdef0123456789abcdef"),),
    port=8888,
    node_selector=(("gputype", "a100"),),
    run_as_user=1000,
    home_claim="gpu-portal-home",
    lb_address_pool="tenants",
)

CUSTOM_BATCH = WorkloadSpec(
    workload_id=7,
    name="wl-7-train",
    namespace="gpu-vision-lab-abc123",
    project_id="d964ebf8619749c3",
    owner="researcher",
    owner_id="5e1f0c6b2a",
    template="custom",
    kind="batch",
    image="nvcr.io/nvidia/pytorch:24.01-py3",
    command=("python", "-c", "print('héllo \"world\"; $(id)')"),
    args=("--epochs", "3"),
    gpu_resource="nvidia.com/mig-1g.10gb",
    gpu_count=2,
    node_selector=(("gputype", "v100"), ("zone", "b")),
    cpu="8",
    memory="32Gi",
    max_runtime_seconds=3600,
    run_as_non_root=False,
    pod_annotations=(("kubesim.io/run-seconds", "1"),),
    backoff_limit=1,
    ttl_seconds_after_finished=600,
)

JUPYTER_LABELS = {
    "app.kubernetes.io/managed-by": "gpu-portal",
    "app.kubernetes.io/name": "jupyter",
    "app.kubernetes.io/instance": "wl-42-my-notebook",
    "gpu-portal.io/workload-id": "42",
    "gpu-portal.io/project-id": "d964ebf8619749c3",
    "gpu-portal.io/owner": "researcher",
    "gpu-portal.io/owner-id": "5e1f0c6b2a",
}
SELECTOR_42 = {"app.kubernetes.io/managed-by": "gpu-portal", "gpu-portal.io/workload-id": "42"}
GPU_TOLERATION = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
CONTAINER_SECURITY = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
SHM = {"name": "dshm", "emptyDir": {"medium": "Memory"}}


@pytest.mark.parametrize("spec", [JUPYTER, CUSTOM_BATCH], ids=["jupyter", "batch"])
def test_every_object_is_valid_against_the_kubernetes_schema(spec):
    version = kubernetes_validate.utils.latest_version()
    objects = [*workload_objects(spec),
               make_home_claim("gpu-vision-lab-abc123", "gpu-portal-home", "50Gi", "cephfs",
                               labels(spec)),
               make_home_claim("ns", "home", "1Gi", None, {}, access_mode="ReadWriteOnce")]
    for obj in objects:
        kubernetes_validate.validate(obj, version, strict=True)


def test_strict_schema_validation_would_catch_a_misspelt_field():
    # guards the test above: an unknown field must fail, or "valid" means nothing
    job = make_job(CUSTOM_BATCH)
    job["spec"]["backofLimit"] = 1
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(job, kubernetes_validate.utils.latest_version(), strict=True)


def test_creation_order():
    assert [o["kind"] for o in workload_objects(JUPYTER)] == ["Secret", "Deployment", "Service"]
    assert [o["kind"] for o in workload_objects(CUSTOM_BATCH)] == ["Job"]
    with_secret = dataclasses.replace(CUSTOM_BATCH, secret_env=(("API_KEY", "k"),))
    assert [o["kind"] for o in workload_objects(with_secret)] == ["Secret", "Job"]
    for obj in workload_objects(JUPYTER):
        assert obj["metadata"]["name"] == "wl-42-my-notebook"
        assert obj["metadata"]["namespace"] == "gpu-vision-lab-abc123"
        assert obj["metadata"]["labels"] == JUPYTER_LABELS


def test_deterministic():
    again = dataclasses.replace(JUPYTER)
    assert workload_objects(again) == workload_objects(JUPYTER)
    # no shared mutable parts: changing one result leaves the next call untouched
    expected = copy.deepcopy(workload_objects(JUPYTER))
    first = workload_objects(JUPYTER)
    first[1]["metadata"]["labels"]["x"] = "y"
    first[1]["spec"]["selector"]["matchLabels"]["x"] = "y"
    first[1]["spec"]["template"]["spec"]["tolerations"].append({})
    first[1]["spec"]["template"]["spec"]["containers"][0]["securityContext"]["capabilities"][
        "drop"].append("x")
    assert workload_objects(JUPYTER) == expected


def test_jupyter_pod_template():
    assert make_pod_template(JUPYTER) == {
        "metadata": {"labels": {**JUPYTER_LABELS, "gpu-portal.io/exposed": "true"}},
        "spec": {
            "serviceAccountName": "workload",
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "restartPolicy": "Always",
            "securityContext": {
                "seccompProfile": {"type": "RuntimeDefault"},
                "runAsNonRoot": True,
                "runAsUser": 1000,
                "fsGroup": 1000,
            },
            "nodeSelector": {"gputype": "a100"},
            "tolerations": GPU_TOLERATION,
            "containers": [{
                "name": "app",
                "image": "quay.io/jupyter/pytorch-notebook:cuda12-2024-06-17",
                "imagePullPolicy": "IfNotPresent",
                "args": ["start-notebook.py", "--ServerApp.root_dir=/home/portal"],
                "env": [
                    {"name": "JUPYTER_ENABLE_LAB", "value": "yes"},
                    {"name": "JUPYTER_TOKEN", "valueFrom": {"secretKeyRef": {
                        "name": "wl-42-my-notebook", "key": "JUPYTER_TOKEN"}}},
                ],
                "ports": [{"name": "http", "containerPort": 8888, "protocol": "TCP"}],
                "readinessProbe": {"tcpSocket": {"port": "http"}, "periodSeconds": 5,
                                   "failureThreshold": 3},
                "resources": {
                    "limits": {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "1"},
                    "requests": {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "1"},
                },
                "securityContext": CONTAINER_SECURITY,
                "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"},
                                 {"name": "home", "mountPath": "/home/portal"}],
            }],
            "volumes": [SHM, {"name": "home",
                              "persistentVolumeClaim": {"claimName": "gpu-portal-home"}}],
        },
    }


def test_jupyter_token_lives_only_in_the_secret():
    secret = make_secret(JUPYTER)
    assert secret["type"] == "Opaque"
    assert secret["data"] == {
        "JUPYTER_TOKEN": base64.b64encode(b"0123456789abcdef0123456789abcdef").decode()}
    assert "0123456789abcdef" not in repr(make_deployment(JUPYTER))
    assert make_secret(CUSTOM_BATCH) is None


def test_deployment_is_one_replica_recreated():
    deployment = make_deployment(JUPYTER)
    assert deployment["apiVersion"] == "apps/v1"
    spec = deployment["spec"]
    assert spec["replicas"] == 1
    assert spec["strategy"] == {"type": "Recreate"}
    assert spec["selector"] == {"matchLabels": SELECTOR_42}
    # the selector must pick the template's own pods
    assert SELECTOR_42.items() <= spec["template"]["metadata"]["labels"].items()
    assert spec["template"] == make_pod_template(JUPYTER)


def test_service_is_a_load_balancer_in_the_chosen_pool():
    assert make_service(JUPYTER) == {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "wl-42-my-notebook", "namespace": "gpu-vision-lab-abc123",
                     "labels": JUPYTER_LABELS,
                     "annotations": {"metallb.io/address-pool": "tenants"}},
        "spec": {
            "type": "LoadBalancer",
            "allocateLoadBalancerNodePorts": False,
            "selector": SELECTOR_42,
            "ports": [{"name": "http", "protocol": "TCP", "port": 8888, "targetPort": "http"}],
        },
    }
    no_pool = make_service(dataclasses.replace(JUPYTER, lb_address_pool=None))
    assert "annotations" not in no_pool["metadata"]


def test_custom_batch_job():
    job = make_job(CUSTOM_BATCH)
    batch_labels = {**JUPYTER_LABELS, "app.kubernetes.io/name": "custom",
                    "app.kubernetes.io/instance": "wl-7-train", "gpu-portal.io/workload-id": "7"}
    assert job["metadata"] == {"name": "wl-7-train", "namespace": "gpu-vision-lab-abc123",
                               "labels": batch_labels}
    assert {k: v for k, v in job["spec"].items() if k != "template"} == {
        "completions": 1,
        "parallelism": 1,
        "backoffLimit": 1,
        "activeDeadlineSeconds": 3600,
        "ttlSecondsAfterFinished": 600,
    }
    assert job["spec"]["template"] == {
        # batch pods are not exposed: no gpu-portal.io/exposed label
        "metadata": {"labels": batch_labels,
                     "annotations": {"kubesim.io/run-seconds": "1"}},
        "spec": {
            "serviceAccountName": "workload",
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "restartPolicy": "Never",
            # the template allows root: no runAsNonRoot, but seccomp stays
            "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
            "nodeSelector": {"gputype": "v100", "zone": "b"},
            "tolerations": GPU_TOLERATION,
            "containers": [{
                "name": "app",
                "image": "nvcr.io/nvidia/pytorch:24.01-py3",
                "imagePullPolicy": "IfNotPresent",
                # argv exactly as given: quotes, unicode and $(...) reach the program untouched
                "command": ["python", "-c", "print('héllo \"world\"; $(id)')"],
                "args": ["--epochs", "3"],
                "resources": {
                    "limits": {"cpu": "8", "memory": "32Gi", "nvidia.com/mig-1g.10gb": "2"},
                    "requests": {"cpu": "8", "memory": "32Gi", "nvidia.com/mig-1g.10gb": "2"},
                },
                "securityContext": CONTAINER_SECURITY,
                "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
            }],
            "volumes": [SHM],
        },
    }


def test_job_without_maximum_runtime_has_no_deadline():
    job = make_job(dataclasses.replace(CUSTOM_BATCH, max_runtime_seconds=None))
    assert "activeDeadlineSeconds" not in job["spec"]


def test_a_pod_without_gpus_neither_asks_for_nor_tolerates_them():
    pod = make_pod_template(dataclasses.replace(CUSTOM_BATCH, gpu_count=0))
    assert "tolerations" not in pod["spec"]
    assert pod["spec"]["containers"][0]["resources"]["limits"] == {"cpu": "8",
                                                                  "memory": "32Gi"}


@pytest.mark.parametrize(("image", "policy"), [
    ("ubuntu", "Always"),
    ("ubuntu:latest", "Always"),
    ("ubuntu:24.04", "IfNotPresent"),
    ("ubuntu@sha256:" + "a" * 64, "IfNotPresent"),
])
def test_pull_policy_follows_kubernetes_defaults(image, policy):
    pod = make_pod_template(dataclasses.replace(CUSTOM_BATCH, image=image))
    assert pod["spec"]["containers"][0]["imagePullPolicy"] == policy


def test_owner_labels_are_label_safe():
    spec = dataclasses.replace(JUPYTER, owner="Dr. Zoë O'Brien", owner_id="a" * 70)
    got = labels(spec)
    assert got["gpu-portal.io/owner"] == "Dr.-Zo-O-Brien"
    assert len(got["gpu-portal.io/owner-id"]) == 63
    kubernetes_validate.validate(make_service(spec), kubernetes_validate.utils.latest_version(),
                                 strict=True)


def test_home_claim():
    assert make_home_claim("ns", "gpu-portal-home", "50Gi", "cephfs", {"a": "b"}) == {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "gpu-portal-home", "namespace": "ns", "labels": {"a": "b"}},
        "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "50Gi"}},
                 "storageClassName": "cephfs"},
    }
    assert "storageClassName" not in make_home_claim("ns", "h", "1Gi", None, {})["spec"]


@pytest.mark.parametrize(("change", "message"), [
    ({"kind": "daemon"}, "kind must be"),
    ({"port": None}, "needs a port"),
    ({"port": 70000}, "outside"),
    ({"gpu_count": -1}, "negative"),
    ({"max_runtime_seconds": 0}, "positive"),
    ({"image": "ubuntu; rm -rf /"}, "spaces"),
    ({"env": (("BAD NAME", "x"),)}, "not a valid environment variable name"),
    ({"env": (("JUPYTER_TOKEN", "x"),)}, "given twice"),
])
def test_impossible_specs_are_refused_before_any_manifest(change, message):
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(JUPYTER, **change)
