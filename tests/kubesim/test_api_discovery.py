"""Discovery, health, OpenAPI and unknown paths, as clients see them."""

from __future__ import annotations

import json

from kubernetes import client, dynamic

NOT_FOUND = {
    "kind": "Status",
    "apiVersion": "v1",
    "metadata": {},
    "status": "Failure",
    "message": "the server could not find the requested resource",
    "reason": "NotFound",
    "details": {},
    "code": 404,
}


def test_version_and_health(raw, api_client):
    info = client.VersionApi(api_client).get_code()
    assert (info.major, info.minor) == ("1", "37")
    for field in (
        "git_version",
        "git_commit",
        "git_tree_state",
        "build_date",
        "go_version",
        "compiler",
        "platform",
    ):
        assert getattr(info, field)
    for path in ("/healthz", "/readyz", "/livez"):
        status, _, body = raw.request("GET", path)
        assert (status, body) == (200, b"ok")


def test_api_versions_and_groups(raw):
    status, body = raw.json("GET", "/api")
    assert status == 200
    assert body["kind"] == "APIVersions" and body["versions"] == ["v1"]
    assert body["serverAddressByClientCIDRs"][0]["clientCIDR"] == "0.0.0.0/0"
    status, body = raw.json("GET", "/apis")
    groups = {g["name"]: g for g in body["groups"]}
    assert set(groups) >= {"apps", "batch", "networking.k8s.io", "rbac.authorization.k8s.io"}
    assert groups["apps"]["preferredVersion"] == {"groupVersion": "apps/v1", "version": "v1"}
    status, body = raw.json("GET", "/apis/apps")
    assert status == 200 and body["kind"] == "APIGroup" and body["name"] == "apps"


def test_resource_lists(raw):
    _, core = raw.json("GET", "/api/v1")
    by_name = {r["name"]: r for r in core["resources"]}
    pods = by_name["pods"]
    assert pods["kind"] == "Pod" and pods["namespaced"] is True
    assert pods["singularName"] == "pod" and pods["shortNames"] == ["po"]
    assert set(pods["verbs"]) == {
        "create",
        "delete",
        "deletecollection",
        "get",
        "list",
        "patch",
        "update",
        "watch",
    }
    assert by_name["pods/log"]["verbs"] == ["get"]
    assert set(by_name["pods/status"]["verbs"]) == {"get", "patch", "update"}
    assert by_name["namespaces"]["namespaced"] is False
    for name in (
        "nodes",
        "services",
        "endpoints",
        "secrets",
        "configmaps",
        "persistentvolumeclaims",
        "events",
        "serviceaccounts",
        "resourcequotas",
        "limitranges",
        "services/status",
        "resourcequotas/status",
    ):
        assert name in by_name
    _, apps = raw.json("GET", "/apis/apps/v1")
    assert {r["name"] for r in apps["resources"]} >= {
        "deployments",
        "deployments/status",
        "replicasets",
        "replicasets/status",
    }
    _, rbac = raw.json("GET", "/apis/rbac.authorization.k8s.io/v1")
    scoped = {r["name"]: r["namespaced"] for r in rbac["resources"]}
    assert scoped == {
        "roles": True,
        "rolebindings": True,
        "clusterroles": False,
        "clusterrolebindings": False,
    }


def test_aggregated_discovery(raw):
    aggregated = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    status, headers, body = raw.request("GET", "/apis",
                                        headers={"Accept": aggregated + ",application/json"})
    assert status == 200 and headers["Content-Type"] == aggregated
    doc = json.loads(body)
    assert doc["kind"] == "APIGroupDiscoveryList"
    apps = next(g for g in doc["items"] if g["metadata"]["name"] == "apps")
    [v1] = apps["versions"]
    deployments = next(r for r in v1["resources"] if r["resource"] == "deployments")
    assert deployments["scope"] == "Namespaced" and deployments["shortNames"] == ["deploy"]
    scale = next(s for s in deployments["subresources"] if s["subresource"] == "scale")
    assert scale["responseKind"] == {"group": "autoscaling", "version": "v1", "kind": "Scale"}
    status, headers, body = raw.request("GET", "/api", headers={"Accept": aggregated})
    [core] = json.loads(body)["items"]
    assert "name" not in core["metadata"]
    assert any(r["resource"] == "pods" for r in core["versions"][0]["resources"])
    # a client that prefers plain JSON gets it
    status, headers, body = raw.request("GET", "/apis",
                                        headers={"Accept": "application/json," + aggregated})
    assert "apidiscovery" not in headers["Content-Type"]
    assert b'"APIGroupList"' in body


def test_unknown_paths_are_404_status(raw):
    for method, path in [
        ("GET", "/api/v2"),
        ("GET", "/api/v1/widgets"),
        ("GET", "/apis/example.com/v1"),
        ("GET", "/apis/apps/v1/widgets"),
        ("GET", "/nonsense"),
        ("POST", "/api/v1/namespaces/default/gizmos"),
        ("GET", "/api/v1/namespaces/default/pods/x/exec/y"),
        ("GET", "/api/v1/namespaces/default/configmaps/x/status"),
    ]:
        status, body = raw.json(method, path)
        assert (status, body) == (404, NOT_FOUND), (method, path)


def test_openapi_v3_declares_field_validation_for_patch(raw):
    status, root = raw.json("GET", "/openapi/v3")
    assert status == 200
    assert {"api/v1", "apis/apps/v1", "apis/batch/v1"} <= set(root["paths"])
    url = root["paths"]["apis/apps/v1"]["serverRelativeURL"]
    status, doc = raw.json("GET", url)
    assert status == 200 and doc["openapi"].startswith("3.")
    patch = doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"]
    assert patch["x-kubernetes-group-version-kind"] == {
        "group": "apps",
        "kind": "Deployment",
        "version": "v1",
    }
    assert {"name": "fieldValidation", "in": "query"}.items() <= next(
        p for p in patch["parameters"] if p["name"] == "fieldValidation"
    ).items()
    assert "io.k8s.api.apps.v1.Deployment" in doc["components"]["schemas"]
    assert raw.json("GET", "/openapi/v3/apis/nope/v1")[0] == 404


def test_dynamic_client_walks_discovery(api_client, kube_namespace):
    dyn = dynamic.DynamicClient(api_client)
    cms = dyn.resources.get(api_version="v1", kind="ConfigMap")
    cms.create(
        body={
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "dyn"},
            "data": {"a": "1"},
        },
        namespace=kube_namespace,
    )
    got = cms.get(name="dyn", namespace=kube_namespace)
    assert got.data.a == "1"
    deployments = dyn.resources.get(api_version="apps/v1", kind="Deployment")
    assert deployments.namespaced and deployments.name == "deployments"
