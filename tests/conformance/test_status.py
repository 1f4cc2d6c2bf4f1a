"""Status bodies of refused calls: code, reason, message and details, as clients parse them."""

from __future__ import annotations

from tests.conformance import manifests as m
from tests.conformance.cluster import Cluster, eventually

FAILURE = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure"}
RFC1123 = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
           "'-' or '.', and must start and end with an alphanumeric character (e.g. "
           "'example.com', regex used for validation is "
           "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")


def test_not_found_in_the_core_group(cluster: Cluster, ns: str):
    resp = cluster.request("GET", f"/api/v1/namespaces/{ns}/pods/nope")
    assert resp.status == 404
    assert resp.json() == {**FAILURE, "message": 'pods "nope" not found', "reason": "NotFound",
                           "details": {"name": "nope", "kind": "pods"}, "code": 404}


def test_not_found_names_the_group(cluster: Cluster, ns: str):
    resp = cluster.request("GET", f"/apis/apps/v1/namespaces/{ns}/deployments/nope")
    assert resp.status == 404
    assert resp.json() == {**FAILURE, "message": 'deployments.apps "nope" not found',
                           "reason": "NotFound", "code": 404,
                           "details": {"name": "nope", "group": "apps", "kind": "deployments"}}


def test_create_in_a_missing_namespace_is_404_for_the_namespace(cluster: Cluster):
    resp = cluster.request("POST", "/api/v1/namespaces/no-such-ns-x/configmaps",
                           m.configmap("a"))
    assert resp.status == 404
    assert resp.json() == {**FAILURE, "message": 'namespaces "no-such-ns-x" not found',
                           "reason": "NotFound", "code": 404,
                           "details": {"name": "no-such-ns-x", "kind": "namespaces"}}


def test_unknown_resource_is_a_bare_404(cluster: Cluster):
    resp = cluster.request("GET", "/api/v1/namespaces/default/nosuchthings")
    assert resp.status == 404
    assert resp.json() == {**FAILURE, "message": "the server could not find the requested resource",
                           "reason": "NotFound", "details": {}, "code": 404}


def test_already_exists(cluster: Cluster, ns: str):
    path = f"/apis/apps/v1/namespaces/{ns}/deployments"
    cluster.request("POST", path, m.deployment("web", replicas=0))
    resp = cluster.request("POST", path, m.deployment("web", replicas=0))
    assert resp.status == 409
    assert resp.json() == {**FAILURE, "message": 'deployments.apps "web" already exists',
                           "reason": "AlreadyExists", "code": 409,
                           "details": {"name": "web", "group": "apps", "kind": "deployments"}}


def test_conflict_on_a_stale_resource_version(cluster: Cluster, ns: str):
    path = f"/api/v1/namespaces/{ns}/configmaps"
    first = cluster.request("POST", path, m.configmap("a", {"k": "1"})).json()
    second = dict(first, data={"k": "2"})
    assert cluster.request("PUT", f"{path}/a", second).status == 200
    stale = dict(first, data={"k": "3"})
    resp = cluster.request("PUT", f"{path}/a", stale)
    assert resp.status == 409
    assert resp.json() == {
        **FAILURE, "reason": "Conflict", "code": 409,
        "message": 'Operation cannot be fulfilled on configmaps "a": the object has been '
                   "modified; please apply your changes to the latest version and try again",
        "details": {"name": "a", "kind": "configmaps"}}


def test_conflict_on_a_patch_naming_a_stale_resource_version(cluster: Cluster, ns: str):
    path = f"/api/v1/namespaces/{ns}/configmaps"
    first = cluster.request("POST", path, m.configmap("a", {"k": "1"})).json()
    cluster.request("PATCH", f"{path}/a", {"data": {"k": "2"}},
                    content_type="application/merge-patch+json")
    resp = cluster.request(
        "PATCH", f"{path}/a",
        {"metadata": {"resourceVersion": first["metadata"]["resourceVersion"]},
         "data": {"k": "3"}}, content_type="application/merge-patch+json")
    assert resp.status == 409 and resp.json()["reason"] == "Conflict"


def test_invalid_pod_lists_causes(cluster: Cluster, ns: str):
    resp = cluster.request("POST", f"/api/v1/namespaces/{ns}/pods",
                           {"metadata": {"name": "p"}, "spec": {"containers": []}})
    assert resp.status == 422
    assert resp.json() == {
        **FAILURE, "reason": "Invalid", "code": 422,
        "message": 'Pod "p" is invalid: spec.containers: Required value',
        "details": {"name": "p", "kind": "Pod", "causes": [
            {"reason": "FieldValueRequired", "message": "Required value",
             "field": "spec.containers"}]}}


def test_invalid_name(cluster: Cluster, ns: str):
    resp = cluster.request("POST", f"/api/v1/namespaces/{ns}/configmaps",
                           m.configmap("Bad_Name"))
    assert resp.status == 422
    body = resp.json()
    assert body["message"] == (f'ConfigMap "Bad_Name" is invalid: metadata.name: '
                               f'Invalid value: "Bad_Name": {RFC1123}')
    assert body["details"] == {"name": "Bad_Name", "kind": "ConfigMap", "causes": [
        {"reason": "FieldValueInvalid", "message": f'Invalid value: "Bad_Name": {RFC1123}',
         "field": "metadata.name"}]}


def test_invalid_deployment_names_its_group(cluster: Cluster, ns: str):
    dep = m.deployment("web")
    dep["spec"]["template"]["metadata"]["labels"] = {"app": "other"}
    resp = cluster.request("POST", f"/apis/apps/v1/namespaces/{ns}/deployments", dep)
    assert resp.status == 422
    body = resp.json()
    detail = 'Invalid value: {"app":"other"}: `selector` does not match template `labels`'
    assert body["message"] == f'Deployment.apps "web" is invalid: ' \
                              f"spec.template.metadata.labels: {detail}"
    assert body["details"] == {"name": "web", "group": "apps", "kind": "Deployment", "causes": [
        {"reason": "FieldValueInvalid", "message": detail,
         "field": "spec.template.metadata.labels"}]}


def test_several_invalid_fields_are_bracketed(cluster: Cluster, ns: str):
    pod = m.pod("p", m.pod_spec(m.container("app"), m.container("app"), restart="Sometimes"))
    resp = cluster.request("POST", f"/api/v1/namespaces/{ns}/pods", pod)
    assert resp.status == 422
    body = resp.json()
    assert body["message"].startswith('Pod "p" is invalid: [')
    causes = {(c["field"], c["reason"]) for c in body["details"]["causes"]}
    assert ("spec.containers[1].name", "FieldValueDuplicate") in causes
    assert ("spec.restartPolicy", "FieldValueNotSupported") in causes
    assert 'spec.restartPolicy: Unsupported value: "Sometimes": supported values: ' \
           '"Always", "OnFailure", "Never"' in body["message"]


def test_missing_name_and_generate_name(cluster: Cluster, ns: str):
    resp = cluster.request("POST", f"/api/v1/namespaces/{ns}/configmaps", {"data": {}})
    assert resp.status == 422
    body = resp.json()
    assert body["message"] == ('ConfigMap "" is invalid: metadata.name: Required value: '
                               "name or generateName is required")
    assert body["details"]["causes"] == [{"reason": "FieldValueRequired",
                                          "message": "Required value: name or generateName "
                                                     "is required", "field": "metadata.name"}]


def test_immutable_pod_spec(cluster: Cluster, ns: str):
    cluster.core.create_namespaced_pod(ns, m.pod("p", m.pod_spec(node_selector={"no": "such"})))
    resp = cluster.request("PATCH", f"/api/v1/namespaces/{ns}/pods/p",
                           {"spec": {"containers": [{"name": "app", "ports": [
                               {"containerPort": 80}]}]}},
                           content_type="application/strategic-merge-patch+json")
    assert resp.status == 422
    body = resp.json()
    assert body["reason"] == "Invalid"
    assert body["message"].startswith('Pod "p" is invalid: spec: Forbidden: pod updates may not '
                                      "change fields other than ")
    assert [c["reason"] for c in body["details"]["causes"]] == ["FieldValueForbidden"]


def test_name_in_body_must_match_the_url(cluster: Cluster, ns: str):
    path = f"/api/v1/namespaces/{ns}/configmaps"
    cluster.request("POST", path, m.configmap("a"))
    resp = cluster.request("PUT", f"{path}/a", m.configmap("b"))
    assert resp.status == 400
    assert resp.json() == {**FAILURE, "reason": "BadRequest", "code": 400, "message":
                           "the name of the object (b) does not match the name on the URL (a)"}


def test_namespace_in_body_must_match_the_url(cluster: Cluster, ns: str):
    body = {**m.configmap("a"), "metadata": {"name": "a", "namespace": "elsewhere"}}
    resp = cluster.request("POST", f"/api/v1/namespaces/{ns}/configmaps", body)
    assert resp.status == 400
    assert resp.json()["message"] == ("the namespace of the provided object does not match the "
                                      "namespace sent on the request")


def test_terminating_namespace_refuses_new_content(cluster: Cluster, ns: str):
    path = f"/api/v1/namespaces/{ns}/configmaps"
    held = m.configmap("held")
    held["metadata"]["finalizers"] = ["conformance.test/hold"]
    cluster.request("POST", path, held)
    cluster.core.delete_namespace(ns)
    eventually(lambda: cluster.core.read_namespace(ns).status.phase == "Terminating",
               what="namespace Terminating")
    resp = cluster.request("POST", path, m.configmap("late"))
    assert resp.status == 403
    assert resp.json() == {
        **FAILURE, "reason": "Forbidden", "code": 403,
        "message": f'configmaps "late" is forbidden: unable to create new content in namespace '
                   f"{ns} because it is being terminated",
        "details": {"name": "late", "kind": "configmaps", "causes": [
            {"reason": "NamespaceTerminating",
             "message": f"namespace {ns} is being terminated", "field": "metadata.namespace"}]}}
    # the finalizer holds the namespace until it is removed
    assert cluster.request("GET", f"{path}/held").status == 200
    cluster.request("PATCH", f"{path}/held", {"metadata": {"finalizers": None}},
                    content_type="application/merge-patch+json")
    eventually(lambda: cluster.request("GET", f"/api/v1/namespaces/{ns}").status == 404,
               what="namespace gone")
