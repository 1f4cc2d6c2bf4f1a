"""Bad input: the real server's codes and Status bodies, and state left unchanged."""

from __future__ import annotations

import json

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

GOOD_POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "ok"},
    "spec": {"containers": [{"name": "c", "image": "busybox"}]},
}


def pods_path(ns: str) -> str:
    return f"/api/v1/namespaces/{ns}/pods"


def pod_names(raw, ns: str) -> list[str]:
    _, body = raw.json("GET", pods_path(ns))
    return [p["metadata"]["name"] for p in body["items"]]


def test_malformed_json_is_400(raw, kube_namespace):
    status, body = raw.json("POST", pods_path(kube_namespace), b'{"kind": "Pod", ')
    assert status == 400 and body["kind"] == "Status" and body["reason"] == "BadRequest"
    assert body["code"] == 400 and "json parse error" in body["message"]
    assert pod_names(raw, kube_namespace) == []


def test_wrong_kind_or_api_version_is_400(raw, kube_namespace):
    status, body = raw.json("POST", pods_path(kube_namespace), dict(GOOD_POD, kind="Service"))
    assert status == 400 and body["reason"] == "BadRequest"
    assert "Service" in body["message"]
    status, body = raw.json("POST", pods_path(kube_namespace), dict(GOOD_POD, apiVersion="apps/v1"))
    assert status == 400 and body["message"] == (
        "the API version in the data (apps/v1) does not match the expected API version (v1)"
    )
    assert pod_names(raw, kube_namespace) == []


def test_namespace_mismatch_is_400(raw, kube_namespace):
    pod = dict(GOOD_POD, metadata={"name": "ok", "namespace": "elsewhere"})
    status, body = raw.json("POST", pods_path(kube_namespace), pod)
    assert status == 400 and body["message"] == (
        "the namespace of the provided object does not match the namespace sent on the request"
    )


def test_missing_containers_is_422_with_causes(raw, kube_namespace):
    # (the official client's own model validation would refuse this body before sending)
    status, body = raw.json(
        "POST", pods_path(kube_namespace), {"metadata": {"name": "x"}, "spec": {}}
    )
    assert status == 422
    assert body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'Pod "x" is invalid: spec.containers: Required value',
        "reason": "Invalid",
        "details": {
            "name": "x",
            "kind": "Pod",
            "causes": [
                {
                    "reason": "FieldValueRequired",
                    "message": "Required value",
                    "field": "spec.containers",
                }
            ],
        },
        "code": 422,
    }


def test_invalid_surfaces_through_the_official_client(api_client, kube_namespace):
    core = client.CoreV1Api(api_client)
    with pytest.raises(ApiException) as e:
        core.create_namespaced_pod(
            kube_namespace,
            {"metadata": {"name": "x"}, "spec": {"containers": [{"name": "c", "image": ""}]}},
        )
    assert e.value.status == 422
    assert json.loads(e.value.body)["message"] == (
        'Pod "x" is invalid: spec.containers[0].image: Required value'
    )


def test_bad_names_are_422(raw, kube_namespace):
    status, body = raw.json(
        "POST", pods_path(kube_namespace), dict(GOOD_POD, metadata={"name": "Bad_Name"})
    )
    assert status == 422
    assert body["message"].startswith(
        'Pod "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": a lowercase '
        "RFC 1123 subdomain must consist of"
    )
    assert body["details"]["causes"][0]["field"] == "metadata.name"
    assert body["details"]["causes"][0]["reason"] == "FieldValueInvalid"
    status, body = raw.json("POST", "/api/v1/namespaces", {"metadata": {"name": "a.b"}})
    assert status == 422 and "RFC 1123 label" in body["message"]
    status, body = raw.json("POST", pods_path(kube_namespace), dict(GOOD_POD, metadata={}))
    assert status == 422 and body["message"] == (
        'Pod "" is invalid: metadata.name: Required value: name or generateName is required'
    )
    assert pod_names(raw, kube_namespace) == []


def test_several_errors_are_listed(raw, kube_namespace):
    dep = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "other"}},
                "spec": {"containers": [{"name": "Bad"}]},
            },
        },
    }
    status, body = raw.json("POST", f"/apis/apps/v1/namespaces/{kube_namespace}/deployments", dep)
    assert status == 422
    assert body["message"].startswith('Deployment.apps "web" is invalid: [')
    assert body["details"]["group"] == "apps" and body["details"]["kind"] == "Deployment"
    fields = {c["field"] for c in body["details"]["causes"]}
    assert {
        "spec.template.spec.containers[0].name",
        "spec.template.spec.containers[0].image",
        "spec.template.metadata.labels",
    } <= fields


def test_wrong_types_are_400_decode_errors(raw, kube_namespace):
    pod = dict(GOOD_POD, spec={"containers": "busybox"})
    status, body = raw.json("POST", pods_path(kube_namespace), pod)
    assert status == 400
    assert body["message"].startswith('Pod in version "v1" cannot be handled as a Pod')


def test_unknown_fields_strict_warn_ignore(raw, kube_namespace):
    pod = json.loads(json.dumps(GOOD_POD))
    pod["spec"]["containers"][0]["colour"] = "blue"
    status, body = raw.json("POST", pods_path(kube_namespace) + "?fieldValidation=Strict", pod)
    assert status == 400 and body["message"] == (
        'strict decoding error: unknown field "spec.containers[0].colour"'
    )
    status, headers, _ = raw.request("POST", pods_path(kube_namespace), pod)
    assert status == 201
    warning = headers.get("Warning", "")
    assert warning.startswith("299 - ") and "unknown field" in warning
    assert "spec.containers[0].colour" in warning
    # as on the real server, the object is decoded into its kind and the unknown field is lost
    status, body = raw.json("GET", pods_path(kube_namespace) + "/ok")
    assert status == 200 and "colour" not in body["spec"]["containers"][0]
    assert body["spec"]["containers"][0]["image"] == "busybox"
    # Ignore: no warning, and dropped as well
    ignored = json.loads(json.dumps(pod))
    ignored["metadata"]["name"] = "ignored"
    ignored["spec"]["colour"] = "red"
    status, headers, _ = raw.request("POST", pods_path(kube_namespace) + "?fieldValidation=Ignore",
                                     ignored)
    assert status == 201 and "Warning" not in headers
    status, body = raw.json("GET", pods_path(kube_namespace) + "/ignored")
    assert "colour" not in body["spec"] and "colour" not in body["spec"]["containers"][0]


def test_unknown_query_parameters_are_ignored(raw, kube_namespace):
    status, body = raw.json("GET", pods_path(kube_namespace) + "?frobnicate=yes&pretty=true")
    assert status == 200 and body["kind"] == "PodList"


def test_oversize_body_is_413(raw, kube_namespace):
    big = dict(GOOD_POD, metadata={"name": "big", "annotations": {"x": "y" * (4 * 1024 * 1024)}})
    status, body = raw.json("POST", pods_path(kube_namespace), big)
    assert status == 413 and body["kind"] == "Status" and body["code"] == 413
    assert body["reason"] == "RequestEntityTooLarge"
    assert pod_names(raw, kube_namespace) == []


def test_bad_patch_leaves_object_unchanged(raw, kube_namespace):
    raw.json(
        "POST",
        f"/api/v1/namespaces/{kube_namespace}/configmaps",
        {"metadata": {"name": "cm"}, "data": {"a": "1"}},
    )
    path = f"/api/v1/namespaces/{kube_namespace}/configmaps/cm"
    status, body = raw.json(
        "PATCH", path, b"{not json", content_type="application/merge-patch+json"
    )
    assert status == 400
    status, body = raw.json("PATCH", path, {"data": {"a": "2"}}, content_type="text/csv")
    assert status == 415 and body["reason"] == "UnsupportedMediaType"
    status, body = raw.json(
        "PATCH",
        path,
        [
            {"op": "test", "path": "/data/a", "value": "9"},
            {"op": "replace", "path": "/data/a", "value": "3"},
        ],
        content_type="application/json-patch+json",
    )
    assert status == 422
    assert raw.json("GET", path)[1]["data"] == {"a": "1"}


def test_method_not_allowed(raw):
    status, body = raw.json("PUT", "/api/v1/pods")
    assert status == 405 and body["reason"] == "MethodNotAllowed"


def test_token_auth(kubesim_factory):
    server = kubesim_factory(token="s3cret", extra_args=["--no-cluster"])
    from tests.kubesim.conftest import Raw

    raw = Raw(server)
    status, body = raw.json("GET", "/api/v1/namespaces", headers={"Authorization": "Bearer no"})
    assert status == 401 and body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "Unauthorized",
        "reason": "Unauthorized",
        "code": 401,
    }
    server.token = None
    assert Raw(server).json("GET", "/api/v1/namespaces")[0] == 401
    server.token = "s3cret"
    assert raw.json("GET", "/api/v1/namespaces")[0] == 200
    with server.api_client() as api:  # the kubeconfig carries the token
        names = [n.metadata.name for n in client.CoreV1Api(api).list_namespace().items]
    assert "default" in names
    server.stop()
