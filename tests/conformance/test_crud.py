"""CRUD of core, apps and batch objects: what create/get/update/patch/delete answer."""

from __future__ import annotations

import re

from kubernetes import client

from tests.conformance import manifests as m
from tests.conformance.cluster import Cluster, eventually

GENERATED = re.compile(r"[bcdfghjklmnpqrstvwxz2456789]{5}")


def cm_path(ns: str, name: str = "") -> str:
    return f"/api/v1/namespaces/{ns}/configmaps" + (f"/{name}" if name else "")


def test_create_answers_201_with_server_fields(cluster: Cluster, ns: str):
    resp = cluster.request("POST", cm_path(ns), m.configmap("a", {"k": "v"}))
    assert resp.status == 201
    body = resp.json()
    assert (body["kind"], body["apiVersion"]) == ("ConfigMap", "v1")
    meta = body["metadata"]
    assert meta["namespace"] == ns and meta["name"] == "a"
    assert {"uid", "resourceVersion", "creationTimestamp"} <= set(meta)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", meta["creationTimestamp"])
    got = cluster.request("GET", cm_path(ns, "a")).json()
    assert got["data"] == {"k": "v"} and got["metadata"]["uid"] == meta["uid"]


def test_put_replaces_and_bumps_resource_version(cluster: Cluster, ns: str):
    created = cluster.request("POST", cm_path(ns), m.configmap("a", {"k": "v"})).json()
    created["data"] = {"other": "x"}
    resp = cluster.request("PUT", cm_path(ns, "a"), created)
    assert resp.status == 200
    updated = resp.json()
    assert updated["data"] == {"other": "x"}
    assert updated["metadata"]["uid"] == created["metadata"]["uid"]
    assert int(updated["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])


def test_put_without_resource_version_is_unconditional(cluster: Cluster, ns: str):
    cluster.request("POST", cm_path(ns), m.configmap("a", {"k": "v"}))
    resp = cluster.request("PUT", cm_path(ns, "a"), m.configmap("a", {"k": "w"}))
    assert resp.status == 200 and resp.json()["data"] == {"k": "w"}


def test_update_without_change_keeps_resource_version(cluster: Cluster, ns: str):
    created = cluster.request("POST", cm_path(ns), m.configmap("a", {"k": "v"})).json()
    same = cluster.request("PUT", cm_path(ns, "a"), created).json()
    assert same["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


def test_merge_patch_sets_and_removes_keys(cluster: Cluster, ns: str):
    cluster.request("POST", cm_path(ns), m.configmap("a", {"k": "v", "gone": "x"}))
    resp = cluster.request("PATCH", cm_path(ns, "a"),
                           {"data": {"gone": None, "new": "n"}, "metadata": {"labels": {"l": "1"}}},
                           content_type="application/merge-patch+json")
    assert resp.status == 200
    body = resp.json()
    assert body["data"] == {"k": "v", "new": "n"} and body["metadata"]["labels"] == {"l": "1"}


def test_json_patch_applies_operations(cluster: Cluster, ns: str):
    cluster.request("POST", cm_path(ns), m.configmap("a", {"k": "v"}))
    resp = cluster.request("PATCH", cm_path(ns, "a"), [
        {"op": "test", "path": "/data/k", "value": "v"},
        {"op": "add", "path": "/data/j", "value": "w"},
        {"op": "remove", "path": "/data/k"},
    ], content_type="application/json-patch+json")
    assert resp.status == 200 and resp.json()["data"] == {"j": "w"}


def test_strategic_merge_patch_merges_containers_by_name(cluster: Cluster, ns: str):
    dep = m.deployment("web")
    dep["spec"]["template"]["spec"]["containers"].append(m.container("side"))
    cluster.apps.create_namespaced_deployment(ns, dep)
    patch = {"spec": {"template": {"spec": {"containers": [
        {"name": "side", "env": [{"name": "MODE", "value": "x"}]}]}}}}
    resp = cluster.request("PATCH", f"/apis/apps/v1/namespaces/{ns}/deployments/web", patch,
                           content_type="application/strategic-merge-patch+json")
    assert resp.status == 200
    containers = resp.json()["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["app", "side"]
    assert containers[1]["image"] == m.IMAGE
    assert containers[1]["env"] == [{"name": "MODE", "value": "x"}]
    # a JSON merge patch replaces the whole list instead
    resp = cluster.request("PATCH", f"/apis/apps/v1/namespaces/{ns}/deployments/web", {
        "spec": {"template": {"spec": {"containers": [{"name": "only", "image": m.IMAGE}]}}}},
        content_type="application/merge-patch+json")
    assert [c["name"] for c in resp.json()["spec"]["template"]["spec"]["containers"]] == ["only"]


def test_patch_with_unsupported_content_type_is_415(cluster: Cluster, ns: str):
    cluster.request("POST", cm_path(ns), m.configmap("a"))
    resp = cluster.request("PATCH", cm_path(ns, "a"), {"data": {}}, content_type="text/plain")
    assert resp.status == 415
    assert resp.json()["reason"] == "UnsupportedMediaType"


def test_generation_counts_spec_changes_only(cluster: Cluster, ns: str):
    created = cluster.apps.create_namespaced_deployment(ns, m.deployment("web"))
    assert created.metadata.generation == 1
    labelled = cluster.apps.patch_namespaced_deployment(
        "web", ns, {"metadata": {"labels": {"tier": "front"}}})
    assert labelled.metadata.generation == 1
    scaled = cluster.apps.patch_namespaced_deployment("web", ns, {"spec": {"replicas": 0}})
    assert scaled.metadata.generation == 2


def test_status_is_ignored_on_the_main_resource(cluster: Cluster, ns: str):
    created = cluster.request("POST", f"/apis/apps/v1/namespaces/{ns}/deployments",
                              {**m.deployment("web", replicas=0),
                               "status": {"replicas": 42}}).json()
    assert created.get("status", {}).get("replicas") in (None, 0)
    created["status"] = {"observedGeneration": 99}
    del created["metadata"]["resourceVersion"]  # the controller may have written since
    updated = cluster.request("PUT", f"/apis/apps/v1/namespaces/{ns}/deployments/web",
                              created).json()
    assert updated.get("status", {}).get("observedGeneration") != 99


def test_status_subresource_ignores_spec(cluster: Cluster, ns: str):
    dep = cluster.request("POST", f"/apis/apps/v1/namespaces/{ns}/deployments",
                          m.deployment("web", replicas=0)).json()
    del dep["metadata"]["resourceVersion"]  # the controller may have written since
    dep["spec"]["replicas"] = 5
    dep["status"] = {"replicas": 0, "observedGeneration": 7}
    resp = cluster.request("PUT", f"/apis/apps/v1/namespaces/{ns}/deployments/web/status", dep)
    assert resp.status == 200
    body = resp.json()
    assert body["spec"]["replicas"] == 0 and body["status"]["observedGeneration"] == 7


def test_generate_name_makes_a_unique_name(cluster: Cluster, ns: str):
    body = {"metadata": {"generateName": "cfg-"}, "data": {}}
    names = {cluster.request("POST", cm_path(ns), body).json()["metadata"]["name"]
             for _ in range(3)}
    assert len(names) == 3
    for name in names:
        assert name.startswith("cfg-") and GENERATED.fullmatch(name[4:]), name


def test_delete_of_a_plain_object_answers_a_success_status(cluster: Cluster, ns: str):
    created = cluster.request("POST", cm_path(ns), m.configmap("a")).json()
    resp = cluster.request("DELETE", cm_path(ns, "a"))
    assert resp.status == 200
    body = resp.json()
    assert body["kind"] == "Status" and body["status"] == "Success"
    assert body["details"] == {"name": "a", "kind": "configmaps",
                               "uid": created["metadata"]["uid"]}
    assert cluster.request("GET", cm_path(ns, "a")).status == 404


def test_delete_of_a_deployment_names_its_group(cluster: Cluster, ns: str):
    created = cluster.apps.create_namespaced_deployment(ns, m.deployment("web", replicas=0))
    resp = cluster.request("DELETE", f"/apis/apps/v1/namespaces/{ns}/deployments/web")
    assert resp.status == 200
    assert resp.json()["details"] == {"name": "web", "group": "apps", "kind": "deployments",
                                      "uid": created.metadata.uid}


def test_delete_with_uid_precondition(cluster: Cluster, ns: str):
    cluster.request("POST", cm_path(ns), m.configmap("a"))
    resp = cluster.request("DELETE", cm_path(ns, "a"),
                           {"preconditions": {"uid": "00000000-0000-0000-0000-000000000000"}})
    assert resp.status == 409
    body = resp.json()
    uid = cluster.request("GET", cm_path(ns, "a")).json()["metadata"]["uid"]
    assert body["reason"] == "Conflict"
    assert body["details"] == {"name": "a", "kind": "ConfigMap"}
    assert body["message"] == (
        'Operation cannot be fulfilled on ConfigMap "a": the UID in the precondition '
        f"(00000000-0000-0000-0000-000000000000) does not match the UID in record ({uid}). "
        "The object might have been deleted and then recreated")


def test_delete_collection_with_label_selector(cluster: Cluster, ns: str):
    for name, tier in (("a", "x"), ("b", "x"), ("c", "y")):
        cluster.request("POST", cm_path(ns), m.configmap(name, labels={"tier": tier}))
    resp = cluster.request("DELETE", cm_path(ns), query={"labelSelector": "tier=x"})
    assert resp.status == 200
    body = resp.json()
    assert body["kind"] == "ConfigMapList"
    assert sorted(i["metadata"]["name"] for i in body["items"]) == ["a", "b"]
    left = cluster.core.list_namespaced_config_map(ns, label_selector="tier").items
    assert [c.metadata.name for c in left] == ["c"]


def test_unbound_pod_is_deleted_at_once(cluster: Cluster, ns: str):
    cluster.core.create_namespaced_pod(ns, m.pod("p", m.pod_spec(node_selector={"no": "such"})))
    resp = cluster.request("DELETE", f"/api/v1/namespaces/{ns}/pods/p")
    assert resp.status == 200
    assert resp.json()["kind"] == "Pod"
    assert cluster.request("GET", f"/api/v1/namespaces/{ns}/pods/p").status == 404


def test_running_pod_deletion_is_graceful(cluster: Cluster, ns: str):
    cluster.core.create_namespaced_pod(ns, m.pod("p"))
    eventually(lambda: cluster.core.read_namespaced_pod("p", ns).status.phase == "Running",
               what="pod Running")
    resp = cluster.request("DELETE", f"/api/v1/namespaces/{ns}/pods/p")
    assert resp.status == 200
    body = resp.json()
    assert body["kind"] == "Pod"
    assert body["metadata"]["deletionTimestamp"]
    assert body["metadata"]["deletionGracePeriodSeconds"] == 30
    eventually(lambda: cluster.request("GET", f"/api/v1/namespaces/{ns}/pods/p").status == 404,
               what="pod gone")


def test_core_objects_round_trip_through_the_typed_client(cluster: Cluster, ns: str):
    secret = cluster.core.create_namespaced_secret(ns, client.V1Secret(
        metadata=client.V1ObjectMeta(name="s"), string_data={"token": "abc"}))
    assert secret.data == {"token": "YWJj"} and secret.type == "Opaque"
    assert secret.string_data is None
    sa = cluster.core.create_namespaced_service_account(
        ns, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name="robot")))
    assert sa.metadata.name == "robot"
    names = [s.metadata.name for s in cluster.core.list_namespaced_service_account(ns).items]
    assert sorted(names) == ["default", "robot"]
