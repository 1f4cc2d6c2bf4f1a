"""Discovery: /api, /apis, resource lists, /version, OpenAPI v3 and aggregated discovery."""

from __future__ import annotations

import re

from tests.conformance.cluster import Cluster

AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
POD_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


def resources(cluster: Cluster, path: str) -> dict[str, dict]:
    body = cluster.request("GET", path).json()
    assert body["kind"] == "APIResourceList"
    return {r["name"]: r for r in body["resources"]}


def test_core_versions(cluster: Cluster):
    body = cluster.request("GET", "/api").json()
    assert (body["kind"], body["versions"]) == ("APIVersions", ["v1"])
    [address] = body["serverAddressByClientCIDRs"]
    assert address["clientCIDR"] == "0.0.0.0/0"
    assert re.fullmatch(r"[\d.]+:\d+", address["serverAddress"])


def test_group_list(cluster: Cluster):
    body = cluster.request("GET", "/apis").json()
    assert (body["kind"], body["apiVersion"]) == ("APIGroupList", "v1")
    groups = {g["name"]: g for g in body["groups"]}
    for name in ("apps", "batch", "rbac.authorization.k8s.io", "networking.k8s.io", "policy"):
        assert groups[name]["preferredVersion"] == {"groupVersion": f"{name}/v1",
                                                    "version": "v1"}
        assert {"groupVersion": f"{name}/v1", "version": "v1"} in groups[name]["versions"]


def test_core_resources(cluster: Cluster):
    found = resources(cluster, "/api/v1")
    pods = found["pods"]
    assert {k: pods[k] for k in ("singularName", "namespaced", "kind", "shortNames",
                                 "categories")} == {
        "singularName": "pod", "namespaced": True, "kind": "Pod", "shortNames": ["po"],
        "categories": ["all"]}
    assert sorted(pods["verbs"]) == POD_VERBS
    assert found["pods/log"]["verbs"] == ["get"] and found["pods/log"]["kind"] == "Pod"
    assert sorted(found["pods/status"]["verbs"]) == ["get", "patch", "update"]
    assert found["namespaces"]["namespaced"] is False
    assert found["namespaces"]["shortNames"] == ["ns"]
    assert found["events"]["shortNames"] == ["ev"]
    assert found["resourcequotas"]["shortNames"] == ["quota"]


def test_apps_resources(cluster: Cluster):
    found = resources(cluster, "/apis/apps/v1")
    deployments = found["deployments"]
    assert (deployments["kind"], deployments["shortNames"], deployments["categories"]) == (
        "Deployment", ["deploy"], ["all"])
    scale = found["deployments/scale"]
    assert {k: scale.get(k) for k in ("group", "version", "kind")} == {
        "group": "autoscaling", "version": "v1", "kind": "Scale"}
    assert sorted(scale["verbs"]) == ["get", "patch", "update"]


def test_version(cluster: Cluster):
    body = cluster.request("GET", "/version").json()
    assert set(body) >= {"major", "minor", "gitVersion", "gitCommit", "gitTreeState",
                         "buildDate", "goVersion", "compiler", "platform"}
    assert (body["major"], body["minor"], body["compiler"]) == ("1", "37", "gc")
    assert body["gitVersion"].startswith("v1.37.")
    assert re.fullmatch(r"go1\.\d+(\.\d+)?", body["goVersion"])
    assert re.fullmatch(r"linux/(amd64|arm64)", body["platform"])


def test_aggregated_discovery(cluster: Cluster):
    resp = cluster.request("GET", "/apis", accept=AGGREGATED + ",application/json")
    assert resp.status == 200
    assert resp.headers["Content-Type"].startswith(AGGREGATED.split(";as=")[0])
    body = resp.json()
    assert (body["kind"], body["apiVersion"]) == ("APIGroupDiscoveryList",
                                                  "apidiscovery.k8s.io/v2")
    apps = next(g for g in body["items"] if g["metadata"]["name"] == "apps")
    v1 = next(v for v in apps["versions"] if v["version"] == "v1")
    deployments = next(r for r in v1["resources"] if r["resource"] == "deployments")
    assert deployments["responseKind"] == {"group": "", "version": "", "kind": "Deployment"}
    assert deployments["scope"] == "Namespaced"


def test_openapi_v3_index(cluster: Cluster):
    paths = cluster.request("GET", "/openapi/v3").json()["paths"]
    for gv in ("api/v1", "apis/apps/v1", "apis/batch/v1"):
        assert paths[gv]["serverRelativeURL"].startswith(f"/openapi/v3/{gv}?hash=")
    doc = cluster.request("GET", paths["apis/apps/v1"]["serverRelativeURL"]).json()
    assert doc["openapi"].startswith("3.")
    assert "io.k8s.api.apps.v1.Deployment" in doc["components"]["schemas"]
