"""The workload objects as pure functions: exact dicts, and valid against the Kubernetes schema.

Every service the portal launches has the authenticating proxy in front of it: the
specs here carry a `ProxySpec` as the portal builds it, and one test keeps the shape of a spec
without one (a service launched before the proxies).
"""

import base64
import copy
import dataclasses

import kubernetes_validate
import pytest

from access.proxy import (
    CLIENT_SECRET_KEY,
    COOKIE_SECRET_KEY,
    PROXY_CONTAINER,
    PROXY_PORT,
    make_proxy_container,
    make_proxy_volumes,
    proxy_files,
)
from storage.manifests import ClaimSpec, make_volume_claim
from tests.support.manifests import (
    CUSTOM_BATCH,
    DIGITS,
    JUPYTER,
    JUPYTER_PROXY,
    PROXY_SECRETS,
    SERVICES,
)
from workloads.manifests import (
    labels,
    make_deployment,
    make_ingress,
    make_job,
    make_pod_template,
    make_secret,
    make_service,
    workload_objects,
)

# a service launched before the proxies: the application's port is the pod's "http"
UNPROXIED = dataclasses.replace(JUPYTER, proxy=None, secret_data=())


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


@pytest.mark.parametrize("spec", [
    *SERVICES.values(), UNPROXIED, CUSTOM_BATCH,
    # HTTPS on the proxy's port, with the operator's certificate
    dataclasses.replace(DIGITS, proxy=dataclasses.replace(DIGITS.proxy, tls_secret="tenant-tls")),
], ids=[*SERVICES, "jupyter-unproxied", "batch", "digits-tls"])
def test_every_object_is_valid_against_the_kubernetes_schema(spec):
    version = kubernetes_validate.utils.latest_version()
    objects = [*workload_objects(spec),
               make_volume_claim(ClaimSpec(volume_id=3, name="gpu-portal-home",
                                           namespace="gpu-vision-lab-abc123", project_id="p1",
                                           owner_id="u1", size_gib=50, storage_class="cephfs")),
               make_volume_claim(ClaimSpec(volume_id=4, name="vol-4-data", namespace="ns",
                                           project_id="p1", owner_id="u1", size_gib=1,
                                           access_mode="ReadWriteOnce"))]
    assert {"Deployment", "Job"} & {obj["kind"] for obj in objects}
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


JUPYTER_APP = {
    "name": "app",
    "image": "quay.io/jupyter/pytorch-notebook:cuda12-2024-06-17",
    "imagePullPolicy": "IfNotPresent",
    "args": ["start-notebook.py", "--ServerApp.root_dir=/home/portal"],
    "env": [
        {"name": "JUPYTER_ENABLE_LAB", "value": "yes"},
        {"name": "JUPYTER_TOKEN", "valueFrom": {"secretKeyRef": {
            "name": "wl-42-my-notebook", "key": "JUPYTER_TOKEN"}}},
    ],
    # behind the proxy the application's port is "app": only the proxy reaches it, over the
    # pod's loopback; port "http" is the proxy's
    "ports": [{"name": "app", "containerPort": 8888, "protocol": "TCP"}],
    # the application's own readiness, not the proxy's
    "readinessProbe": {"tcpSocket": {"port": "app"}, "periodSeconds": 5,
                       "failureThreshold": 3},
    "resources": {
        "limits": {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "1"},
        "requests": {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "1"},
    },
    "securityContext": CONTAINER_SECURITY,
    "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"},
                     {"name": "home", "mountPath": "/home/portal"}],
}


def port_owner(pod_spec: dict, port_name: str) -> tuple[str, int]:
    """The container and number of the pod's port called so: what a Service's targetPort and a
    NetworkPolicy's port name resolve to."""
    (owner,) = [(c["name"], p["containerPort"]) for c in pod_spec["containers"]
                for p in c.get("ports", []) if p["name"] == port_name]
    return owner


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
            # the application, then the proxy in front of it
            "containers": [JUPYTER_APP, make_proxy_container(JUPYTER_PROXY)],
            "volumes": [SHM, {"name": "home",
                              "persistentVolumeClaim": {"claimName": "gpu-portal-home"}},
                        *make_proxy_volumes(JUPYTER_PROXY)],
        },
    }


@pytest.mark.parametrize("template", SERVICES)
def test_the_pods_port_http_is_the_proxys(template):
    spec = SERVICES[template]
    pod = make_pod_template(spec)["spec"]
    assert [c["name"] for c in pod["containers"]] == ["app", PROXY_CONTAINER]
    assert port_owner(pod, "http") == (PROXY_CONTAINER, PROXY_PORT)
    assert port_owner(pod, "app") == ("app", spec.port)
    # the proxy's volumes are the pod's, after the workload's own
    proxy_volumes = make_proxy_volumes(spec.proxy)
    assert pod["volumes"][len(pod["volumes"]) - len(proxy_volumes):] == proxy_volumes
    assert make_pod_template(spec)["metadata"]["labels"]["gpu-portal.io/exposed"] == "true"


@pytest.mark.parametrize("template", SERVICES)
def test_every_key_and_volume_the_pod_reads_is_there(template):
    """A Secret key or a volume the pod names but nobody made keeps it from ever starting
    (CreateContainerConfigError, FailedMount): the pod and its Secret must agree."""
    spec = SERVICES[template]
    pod = make_pod_template(spec)["spec"]
    keys = set(make_secret(spec)["data"])
    volumes = {v["name"]: v for v in pod["volumes"]}
    for container in pod["containers"]:
        for env in container.get("env", []):
            ref = env.get("valueFrom", {}).get("secretKeyRef")
            if ref:
                assert ref["name"] == spec.name and ref["key"] in keys, env
        for mount in container["volumeMounts"]:
            assert mount["name"] in volumes, mount
    for volume in volumes.values():
        if volume.get("secret", {}).get("secretName") == spec.name:
            assert {item["key"] for item in volume["secret"]["items"]} <= keys


def test_a_service_without_a_proxy_keeps_the_application_on_port_http():
    pod = make_pod_template(UNPROXIED)["spec"]
    app = {**JUPYTER_APP,
           "ports": [{"name": "http", "containerPort": 8888, "protocol": "TCP"}],
           "readinessProbe": {"tcpSocket": {"port": "http"}, "periodSeconds": 5,
                              "failureThreshold": 3}}
    assert pod["containers"] == [app]
    assert pod["volumes"] == [SHM, {"name": "home",
                                    "persistentVolumeClaim": {"claimName": "gpu-portal-home"}}]
    assert [o["kind"] for o in workload_objects(UNPROXIED)] == ["Secret", "Deployment", "Service"]
    assert make_service(UNPROXIED) == make_service(JUPYTER)  # same address, same target name


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def test_the_jupyter_token_and_the_proxys_credentials_live_only_in_the_secret():
    secret = make_secret(JUPYTER)
    assert secret["type"] == "Opaque"
    assert secret["data"] == {
        "JUPYTER_TOKEN": b64("0123456789abcdef0123456789abcdef"),
        "auth-proxy-client-secret": b64("client-secret-0123456789abcdef"),
        "auth-proxy-cookie-secret": b64("Y29va2llLXNlY3JldC0wMTIzNDU2Nzg5YWJjZGVmMDE="),
        # the proxy's files, mounted by make_proxy_volumes from the same Secret
        **{key: b64(text) for key, text in proxy_files(JUPYTER_PROXY).items()},
    }
    deployment = repr(make_deployment(JUPYTER))
    for _, value in (*JUPYTER.secret_env, *JUPYTER.secret_data):
        assert value not in deployment
    # the proxy's keys are no environment variable of the application
    assert [e["name"] for e in make_pod_template(JUPYTER)["spec"]["containers"][0]["env"]] == \
        ["JUPYTER_ENABLE_LAB", "JUPYTER_TOKEN"]
    assert make_secret(CUSTOM_BATCH) is None
    # a service with no token of its own still has a Secret: the proxy's credentials
    assert set(make_secret(DIGITS)["data"]) == {CLIENT_SECRET_KEY, COOKIE_SECRET_KEY,
                                                *proxy_files(DIGITS.proxy)}
    assert [o["kind"] for o in workload_objects(DIGITS)] == ["Secret", "Deployment", "Service"]


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
            # the address stays the application's port; it leads to the pod's "http": the proxy
            "ports": [{"name": "http", "protocol": "TCP", "port": 8888, "targetPort": "http"}],
        },
    }
    assert port_owner(make_pod_template(JUPYTER)["spec"], "http") == (PROXY_CONTAINER, 4180)
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


@pytest.mark.parametrize(("change", "message"), [
    ({"kind": "daemon"}, "kind must be"),
    ({"port": None}, "needs a port"),
    ({"port": 70000}, "outside"),
    ({"gpu_count": -1}, "negative"),
    ({"max_runtime_seconds": 0}, "positive"),
    ({"image": "ubuntu; rm -rf /"}, "spaces"),
    ({"env": (("BAD NAME", "x"),)}, "not a valid environment variable name"),
    ({"env": (("JUPYTER_TOKEN", "x"),)}, "given twice"),
    # the proxy's credentials: Secret keys, given once, never shadowing a secret env var
    ({"secret_data": (*PROXY_SECRETS, ("bad key", "x"))}, "not a valid key of a Secret"),
    ({"secret_data": (*PROXY_SECRETS, ("JUPYTER_TOKEN", "x"))}, "given twice"),
    ({"secret_data": (*PROXY_SECRETS, PROXY_SECRETS[0])}, "given twice"),
    # a proxy that could not work: refused here, not found as a pod that is never ready
    ({"kind": "batch"}, "a batch job.s proxy is there for SSH only"),
    ({"port": 8889}, "forwards to port 8888, but the application listens on 8889"),
    ({"proxy": dataclasses.replace(JUPYTER_PROXY, upstream_port=4180), "port": 4180},
     "both want port 4180"),
    ({"proxy": dataclasses.replace(JUPYTER_PROXY, secret_name="other")}, "own Secret"),
    ({"secret_data": PROXY_SECRETS[:1]}, "lacks the proxy's auth-proxy-cookie-secret"),
    ({"secret_data": ()}, "lacks the proxy's auth-proxy-client-secret, auth-proxy-cookie"),
    ({"secret_env": ()}, "sends JUPYTER_TOKEN upstream, but the Secret does not hold it"),
    ({"secret_data": (*PROXY_SECRETS, ("auth-proxy.yaml", "x"))}, "one of the proxy's files"),
])
def test_impossible_specs_are_refused_before_any_manifest(change, message):
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(JUPYTER, **change)


def test_a_secret_with_only_data_is_valid_without_a_proxy():
    # secret_data does not need a proxy: a batch workload may carry keys no env var reads
    spec = dataclasses.replace(CUSTOM_BATCH, secret_data=(("extra", "v"),))
    assert make_secret(spec)["data"] == {"extra": b64("v")}


SHARED = dataclasses.replace(JUPYTER, exposure="shared", host="w-42.apps.example.test",
                             ingress_class="gpu-portal")


def test_behind_the_shared_gateway_a_clusterip_service_and_an_ingress_for_its_host():
    """PORTAL_SERVICE_EXPOSURE=shared: no address of the pool; the gateway routes the
    workload's host name to its Service's port "http" (the proxy)."""
    objects = workload_objects(SHARED)
    assert [o["kind"] for o in objects] == ["Secret", "Deployment", "Service", "Ingress"]
    service, ingress = objects[2], objects[3]
    assert service == {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "wl-42-my-notebook", "namespace": "gpu-vision-lab-abc123",
                     "labels": JUPYTER_LABELS},
        "spec": {"type": "ClusterIP", "selector": SELECTOR_42,
                 "ports": [{"name": "http", "protocol": "TCP", "port": 8888,
                            "targetPort": "http"}]},
    }
    assert ingress == {
        "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"name": "wl-42-my-notebook", "namespace": "gpu-vision-lab-abc123",
                     "labels": JUPYTER_LABELS},
        "spec": {"ingressClassName": "gpu-portal", "rules": [{
            "host": "w-42.apps.example.test",
            "http": {"paths": [{"path": "/", "pathType": "Prefix", "backend": {
                "service": {"name": "wl-42-my-notebook", "port": {"name": "http"}}}}]}}]},
    }
    for obj in objects:
        kubernetes_validate.validate(obj, kubernetes_validate.utils.latest_version(),
                                     strict=True)
    # without a class: the cluster's default IngressClass
    assert "ingressClassName" not in make_ingress(
        dataclasses.replace(SHARED, ingress_class=None))["spec"]
    # the load balancer mode makes no Ingress
    assert "Ingress" not in [o["kind"] for o in workload_objects(JUPYTER)]


def test_a_shared_service_needs_its_host_and_a_known_mode():
    with pytest.raises(ValueError, match="needs its host name"):
        dataclasses.replace(SHARED, host=None)
    with pytest.raises(ValueError, match="exposure must be one of"):
        dataclasses.replace(JUPYTER, exposure="nodeport")


def test_a_quarter_of_a_time_sliced_t4_asks_for_its_replicas_on_its_nodes():
    # the device plugin's renamed time-slicing resource: each unit a replica of a T4; the pod
    # tolerates the GPU taint as any GPU pod does
    shared = dataclasses.replace(JUPYTER, gpu_resource="nvidia.com/gpu.shared", gpu_count=2,
                                 node_selector=(("gputype", "t4-shared"),))
    pod = make_deployment(shared)["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"gputype": "t4-shared"}
    assert pod["tolerations"] == GPU_TOLERATION
    app = pod["containers"][0]["resources"]
    assert (app["limits"]["nvidia.com/gpu.shared"], app["requests"]["nvidia.com/gpu.shared"]) == (
        "2", "2")
    assert "nvidia.com/gpu" not in app["limits"]
    version = kubernetes_validate.utils.latest_version()
    for obj in workload_objects(shared):
        kubernetes_validate.validate(obj, version, strict=True)
