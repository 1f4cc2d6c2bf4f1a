"""Lists: label and field selectors, pagination, list shape and resourceVersion semantics."""

from __future__ import annotations

import pytest

from tests.conformance import manifests as m
from tests.conformance.cluster import Cluster, eventually

TIERS = {"a": {"tier": "web", "env": "prod"}, "b": {"tier": "db", "env": "prod"},
         "c": {"tier": "web"}, "d": {}}


@pytest.fixture
def labelled(cluster: Cluster, ns: str) -> str:
    for name, labels in TIERS.items():
        cluster.request("POST", f"/api/v1/namespaces/{ns}/configmaps",
                        m.configmap(name, labels={"set": "x", **labels}))
    return ns


def names(cluster: Cluster, ns: str, **query: str) -> list[str]:
    resp = cluster.request("GET", f"/api/v1/namespaces/{ns}/configmaps", query=query)
    assert resp.status == 200, resp.text
    return [i["metadata"]["name"] for i in resp.json()["items"]]


@pytest.mark.parametrize(("selector", "expected"), [
    ("set=x,tier=web", ["a", "c"]),
    ("set==x,tier==web,env=prod", ["a"]),
    ("set=x,tier!=web", ["b", "d"]),
    ("set=x,tier in (web,db)", ["a", "b", "c"]),
    ("set=x,tier notin (web)", ["b", "d"]),
    ("set=x,env", ["a", "b"]),
    ("set=x,!env", ["c", "d"]),
], ids=["equals", "double-equals", "not-equals", "in", "notin", "exists", "not-exists"])
def test_label_selector(cluster: Cluster, labelled: str, selector: str, expected: list[str]):
    assert names(cluster, labelled, labelSelector=selector) == expected


def test_bad_label_selector_is_400(cluster: Cluster, ns: str):
    resp = cluster.request("GET", f"/api/v1/namespaces/{ns}/configmaps",
                           query={"labelSelector": "tier in (web"})
    assert resp.status == 400
    assert resp.json()["reason"] == "BadRequest"


def test_field_selector_on_name(cluster: Cluster, labelled: str):
    assert names(cluster, labelled, fieldSelector="metadata.name=b") == ["b"]
    assert names(cluster, labelled, fieldSelector="metadata.name!=b", labelSelector="set") == [
        "a", "c", "d"]


def test_field_selector_on_namespace_across_namespaces(cluster: Cluster, labelled: str):
    resp = cluster.request("GET", "/api/v1/configmaps",
                           query={"fieldSelector": f"metadata.namespace={labelled}",
                                  "labelSelector": "set=x"})
    items = resp.json()["items"]
    assert [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in items] == [
        (labelled, n) for n in "abcd"]


def test_unsupported_field_selector_is_400(cluster: Cluster, ns: str):
    resp = cluster.request("GET", f"/api/v1/namespaces/{ns}/pods",
                           query={"fieldSelector": "spec.foo=bar"})
    assert resp.status == 400
    body = resp.json()
    assert (body["reason"], body["message"]) == ("BadRequest",
                                                 "field label not supported: spec.foo")


def test_pod_field_selectors_on_phase_and_node(cluster: Cluster, ns: str):
    cluster.core.create_namespaced_pod(ns, m.pod("placed", m.pod_spec(nodeName="cpu-1")))
    cluster.core.create_namespaced_pod(ns, m.pod("stuck", m.pod_spec(
        node_selector={"no": "such"})))
    eventually(lambda: cluster.core.read_namespaced_pod("placed", ns).status.phase == "Running",
               what="pod placed Running")
    path = f"/api/v1/namespaces/{ns}/pods"

    def select(selector: str) -> list[str]:
        resp = cluster.request("GET", path, query={"fieldSelector": selector})
        return [i["metadata"]["name"] for i in resp.json()["items"]]

    assert select("status.phase=Running") == ["placed"]
    assert select("status.phase=Pending") == ["stuck"]
    assert select("status.phase!=Pending") == ["placed"]
    assert select("spec.nodeName=cpu-1") == ["placed"]
    assert select("spec.nodeName=") == ["stuck"]
    assert select("spec.nodeName=cpu-1,status.phase=Pending") == []


def test_list_shape(cluster: Cluster, labelled: str):
    body = cluster.request("GET", f"/api/v1/namespaces/{labelled}/configmaps",
                           query={"labelSelector": "set"}).json()
    assert (body["kind"], body["apiVersion"]) == ("ConfigMapList", "v1")
    assert set(body["metadata"]) == {"resourceVersion"}
    assert body["items"]  # the check below is not vacuous
    assert all("kind" not in i and "apiVersion" not in i for i in body["items"])
    apps = cluster.request("GET", f"/apis/apps/v1/namespaces/{labelled}/deployments").json()
    assert (apps["kind"], apps["apiVersion"], apps["items"]) == ("DeploymentList", "apps/v1", [])


def test_list_resource_version_follows_writes(cluster: Cluster, ns: str):
    path = f"/api/v1/namespaces/{ns}/configmaps"
    before = int(cluster.request("GET", path).json()["metadata"]["resourceVersion"])
    created = cluster.request("POST", path, m.configmap("a")).json()
    after = int(cluster.request("GET", path).json()["metadata"]["resourceVersion"])
    assert before < int(created["metadata"]["resourceVersion"]) <= after


def test_pagination(cluster: Cluster, ns: str):
    path = f"/api/v1/namespaces/{ns}/configmaps"
    for i in range(7):
        cluster.request("POST", path, m.configmap(f"cm-{i}"))
    pages = []
    query = {"limit": "3"}
    while True:
        body = cluster.request("GET", path, query=query).json()
        pages.append(body)
        token = body["metadata"].get("continue")
        if not token:
            break
        query = {"limit": "3", "continue": token}
    seen = [i["metadata"]["name"] for p in pages for i in p["items"]]
    listed = [i["metadata"]["name"] for i in cluster.request("GET", path).json()["items"]]
    assert seen == listed and {f"cm-{i}" for i in range(7)} <= set(seen)
    total = len(listed)
    assert [len(p["items"]) for p in pages] == [3, 3, total - 6]
    assert pages[0]["metadata"]["remainingItemCount"] == total - 3
    assert pages[1]["metadata"]["remainingItemCount"] == total - 6
    assert "remainingItemCount" not in pages[-1]["metadata"]
    # every page of one list is read at the first page's resourceVersion
    assert len({p["metadata"]["resourceVersion"] for p in pages}) == 1


def test_pagination_with_a_selector_has_no_remaining_count(cluster: Cluster, ns: str):
    path = f"/api/v1/namespaces/{ns}/configmaps"
    for i in range(4):
        cluster.request("POST", path, m.configmap(f"cm-{i}", labels={"p": "1"}))
    body = cluster.request("GET", path, query={"limit": "2", "labelSelector": "p=1"}).json()
    assert len(body["items"]) == 2 and body["metadata"]["continue"]
    assert "remainingItemCount" not in body["metadata"]


def test_continued_list_is_a_snapshot(cluster: Cluster, ns: str):
    path = f"/api/v1/namespaces/{ns}/configmaps"
    for name in ("b", "c", "d"):
        cluster.request("POST", path, m.configmap(name, labels={"s": "1"}))
    first = cluster.request("GET", path, query={"limit": "1", "labelSelector": "s"}).json()
    cluster.request("POST", path, m.configmap("e", labels={"s": "1"}))
    cluster.request("DELETE", f"{path}/d")
    rest = cluster.request("GET", path, query={"limit": "10", "labelSelector": "s",
                                               "continue": first["metadata"]["continue"]}).json()
    assert [i["metadata"]["name"] for i in rest["items"]] == ["c", "d"]


def test_bad_continue_token_is_400(cluster: Cluster, ns: str):
    resp = cluster.request("GET", f"/api/v1/namespaces/{ns}/configmaps",
                           query={"limit": "1", "continue": "not-a-token"})
    assert resp.status == 400
    body = resp.json()
    assert body["reason"] == "BadRequest"
    assert body["message"].startswith("invalid continue token: ")


def test_resource_version_match_without_resource_version_is_invalid(cluster: Cluster, ns: str):
    resp = cluster.request("GET", f"/api/v1/namespaces/{ns}/configmaps",
                           query={"resourceVersionMatch": "NotOlderThan"})
    assert resp.status == 422
    body = resp.json()
    assert body["reason"] == "Invalid"
    assert body["details"]["kind"] == "ListOptions"
    assert body["details"]["group"] == "meta.k8s.io"
    assert "resourceVersionMatch is forbidden unless resourceVersion is provided" in body[
        "message"]


def test_list_with_any_resource_version(cluster: Cluster, ns: str):
    path = f"/api/v1/namespaces/{ns}/configmaps"
    cluster.request("POST", path, m.configmap("a", labels={"k": "1"}))
    # "0" = any: may be served from a cache, but never fails and keeps the shape
    resp = cluster.request("GET", path, query={"resourceVersion": "0", "labelSelector": "k"})
    assert resp.status == 200 and resp.json()["kind"] == "ConfigMapList"
    current = cluster.request("GET", path).json()["metadata"]["resourceVersion"]
    exact = cluster.request("GET", path, query={
        "resourceVersion": current, "resourceVersionMatch": "Exact", "labelSelector": "k"})
    assert exact.status == 200
    assert [i["metadata"]["name"] for i in exact.json()["items"]] == ["a"]
