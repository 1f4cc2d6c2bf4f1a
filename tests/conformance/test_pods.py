"""Pods and namespaces: what the API server fills in (defaults, admission) and what a started
pod's status looks like."""

from __future__ import annotations

import re
import uuid

from kubernetes import client

from tests.conformance import manifests as m
from tests.conformance.cluster import Cluster, condition, eventually
from tests.conformance.score import known_difference

TOKEN_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"


def created_pod(cluster: Cluster, ns: str, body: dict) -> dict:
    resp = cluster.request("POST", f"/api/v1/namespaces/{ns}/pods", body)
    assert resp.status == 201, resp.text
    return resp.json()


def test_new_namespace(cluster: Cluster):
    name = f"c-ns-{uuid.uuid4().hex[:8]}"
    body = cluster.request("POST", "/api/v1/namespaces", {"metadata": {"name": name}}).json()
    try:
        assert body["metadata"]["labels"] == {"kubernetes.io/metadata.name": name}
        assert body["spec"] == {"finalizers": ["kubernetes"]}
        assert body["status"] == {"phase": "Active"}
        sa = eventually(lambda: cluster.core.read_namespaced_service_account("default", name),
                        what="default ServiceAccount")
        assert sa.metadata.name == "default"
    finally:
        cluster.core.delete_namespace(name)


@known_difference("kubesim serves plain HTTP: it has no cluster CA, so no ConfigMap "
                  "kube-root-ca.crt is published in each namespace")
def test_new_namespace_gets_the_root_ca(cluster: Cluster, ns: str):
    cm = eventually(lambda: cluster.core.read_namespaced_config_map("kube-root-ca.crt", ns),
                    what="kube-root-ca.crt", timeout=5)
    assert cm.data["ca.crt"].startswith("-----BEGIN CERTIFICATE-----")


def test_namespace_deletion(cluster: Cluster):
    name = f"c-ns-{uuid.uuid4().hex[:8]}"
    cluster.core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    cluster.request("POST", f"/api/v1/namespaces/{name}/configmaps", m.configmap("a"))
    resp = cluster.request("DELETE", f"/api/v1/namespaces/{name}")
    assert resp.status == 200
    body = resp.json()
    assert body["kind"] == "Namespace" and body["status"]["phase"] == "Terminating"
    assert body["metadata"]["deletionTimestamp"]
    eventually(lambda: cluster.request("GET", f"/api/v1/namespaces/{name}").status == 404,
               what="namespace gone", timeout=30)


def test_pod_defaults(cluster: Cluster, ns: str):
    pod = created_pod(cluster, ns, m.pod("p", m.pod_spec(node_selector={"no": "such"})))
    spec = pod["spec"]
    assert {k: spec[k] for k in (
        "restartPolicy", "dnsPolicy", "schedulerName", "terminationGracePeriodSeconds",
        "securityContext", "serviceAccountName", "serviceAccount", "enableServiceLinks",
        "priority", "preemptionPolicy")} == {
        "restartPolicy": "Always", "dnsPolicy": "ClusterFirst",
        "schedulerName": "default-scheduler", "terminationGracePeriodSeconds": 30,
        "securityContext": {}, "serviceAccountName": "default", "serviceAccount": "default",
        "enableServiceLinks": True, "priority": 0, "preemptionPolicy": "PreemptLowerPriority"}
    assert spec["tolerations"] == [
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
         "tolerationSeconds": 300},
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
         "tolerationSeconds": 300}]
    c = spec["containers"][0]
    assert {k: c[k] for k in ("terminationMessagePath", "terminationMessagePolicy",
                              "imagePullPolicy", "resources")} == {
        "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
        "imagePullPolicy": "IfNotPresent", "resources": {}}
    assert pod["status"] == {"phase": "Pending", "qosClass": "BestEffort"}


def test_image_pull_policy_for_latest(cluster: Cluster, ns: str):
    pod = created_pod(cluster, ns, m.pod("p", m.pod_spec(
        m.container("a", image="busybox"), m.container("b", image="busybox:latest"),
        m.container("c", image="busybox:1.36"), node_selector={"no": "such"})))
    assert [c["imagePullPolicy"] for c in pod["spec"]["containers"]] == [
        "Always", "Always", "IfNotPresent"]


def test_service_account_token_is_mounted(cluster: Cluster, ns: str):
    pod = created_pod(cluster, ns, m.pod("p", m.pod_spec(node_selector={"no": "such"})))
    [volume] = pod["spec"]["volumes"]
    assert re.fullmatch(r"kube-api-access-[a-z0-9]{5}", volume["name"])
    sources = volume["projected"]["sources"]
    assert sources[0]["serviceAccountToken"] == {"expirationSeconds": 3607, "path": "token"}
    assert sources[1]["configMap"]["name"] == "kube-root-ca.crt"
    assert pod["spec"]["containers"][0]["volumeMounts"] == [
        {"name": volume["name"], "readOnly": True, "mountPath": TOKEN_PATH}]


def test_no_token_when_automount_is_off(cluster: Cluster, ns: str):
    spec = m.pod_spec(node_selector={"no": "such"}, automountServiceAccountToken=False)
    pod = created_pod(cluster, ns, m.pod("p", spec))
    assert "volumes" not in pod["spec"]
    assert "volumeMounts" not in pod["spec"]["containers"][0]


def test_missing_service_account_is_refused(cluster: Cluster, ns: str):
    resp = cluster.request("POST", f"/api/v1/namespaces/{ns}/pods", m.pod("p", m.pod_spec(
        serviceAccountName="robot")))
    assert resp.status == 403
    assert resp.json()["message"] == (f'pods "p" is forbidden: error looking up service account '
                                      f'{ns}/robot: serviceaccount "robot" not found')


def test_qos_classes(cluster: Cluster, ns: str):
    nowhere = {"no": "such"}
    guaranteed = created_pod(cluster, ns, m.pod("g", m.pod_spec(
        m.container(cpu="1", memory="1Gi"), node_selector=nowhere)))
    burstable = m.pod("b", m.pod_spec(node_selector=nowhere))
    burstable["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "100m"}}
    assert guaranteed["status"]["qosClass"] == "Guaranteed"
    assert created_pod(cluster, ns, burstable)["status"]["qosClass"] == "Burstable"


def test_requests_default_to_limits(cluster: Cluster, ns: str):
    pod = m.pod("p", m.pod_spec(node_selector={"no": "such"}))
    pod["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "2", "nvidia.com/gpu": "1"}}
    got = created_pod(cluster, ns, pod)["spec"]["containers"][0]["resources"]
    assert got == {"limits": {"cpu": "2", "nvidia.com/gpu": "1"},
                   "requests": {"cpu": "2", "nvidia.com/gpu": "1"}}


def test_running_pod_status(cluster: Cluster, ns: str):
    cluster.core.create_namespaced_pod(ns, m.pod("p"))

    def ready() -> dict | None:
        pod = cluster.request("GET", f"/api/v1/namespaces/{ns}/pods/p").json()
        return pod if (condition(pod, "Ready") or {}).get("status") == "True" else None

    pod = eventually(ready, what="pod Ready")
    status = pod["status"]
    assert status["phase"] == "Running"
    for kind in ("PodScheduled", "Initialized", "ContainersReady", "Ready",
                 "PodReadyToStartContainers"):
        assert condition(pod, kind)["status"] == "True", kind
    assert {"hostIP", "podIP", "startTime"} <= set(status)
    assert status["podIPs"] == [{"ip": status["podIP"]}]
    [cs] = status["containerStatuses"]
    assert (cs["name"], cs["ready"], cs["started"], cs["restartCount"]) == ("app", True, True, 0)
    assert set(cs["state"]) == {"running"} and cs["state"]["running"]["startedAt"]


def test_bad_image_waits_in_image_pull_back_off(cluster: Cluster, ns: str):
    cluster.core.create_namespaced_pod(ns, m.pod("p", m.pod_spec(m.container(
        image="busybox:nope"))))

    def backing_off() -> dict | None:
        pod = cluster.request("GET", f"/api/v1/namespaces/{ns}/pods/p").json()
        for cs in pod["status"].get("containerStatuses") or []:
            waiting = cs["state"].get("waiting") or {}
            if waiting.get("reason") == "ImagePullBackOff":
                return pod
        return None

    pod = eventually(backing_off, what="ImagePullBackOff")
    assert pod["status"]["phase"] == "Pending"
    waiting = pod["status"]["containerStatuses"][0]["state"]["waiting"]
    assert waiting["message"] == 'Back-off pulling image "busybox:nope"'
    ready = condition(pod, "Ready")
    assert (ready["status"], ready["reason"], ready["message"]) == (
        "False", "ContainersNotReady", "containers with unready status: [app]")
