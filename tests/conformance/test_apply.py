"""Server-side apply over the API: create, field ownership, conflicts, force."""

from __future__ import annotations

from tests.conformance.cluster import Cluster
from tests.conformance.score import SSA_DIFFERENCE

APPLY = "application/apply-patch+yaml"


def apply(cluster: Cluster, ns: str, data: dict[str, str], manager: str,
          force: bool = False):
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": data}
    query = {"fieldManager": manager}
    if force:
        query["force"] = "true"
    return cluster.request("PATCH", f"/api/v1/namespaces/{ns}/configmaps/cfg", body,
                           query=query, content_type=APPLY)


@SSA_DIFFERENCE
def test_apply_creates_and_records_its_manager(cluster: Cluster, ns: str):
    resp = apply(cluster, ns, {"a": "1"}, "alice")
    assert resp.status == 201
    body = resp.json()
    assert body["data"] == {"a": "1"}
    [entry] = body["metadata"]["managedFields"]
    assert {k: entry[k] for k in ("manager", "operation", "apiVersion", "fieldsType")} == {
        "manager": "alice", "operation": "Apply", "apiVersion": "v1", "fieldsType": "FieldsV1"}
    assert "f:a" in entry["fieldsV1"]["f:data"]


def test_apply_without_field_manager_is_400(cluster: Cluster, ns: str):
    resp = cluster.request("PATCH", f"/api/v1/namespaces/{ns}/configmaps/cfg",
                           {"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": "cfg"}}, content_type=APPLY)
    assert resp.status == 422
    required = "Required value: is required for apply patch"
    assert resp.json() == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "reason": "Invalid", "code": 422,
        "message": f'PatchOptions.meta.k8s.io "" is invalid: fieldManager: {required}',
        "details": {"group": "meta.k8s.io", "kind": "PatchOptions", "causes": [
            {"reason": "FieldValueRequired", "message": required, "field": "fieldManager"}]}}


def test_force_on_a_plain_patch_is_invalid(cluster: Cluster, ns: str):
    apply(cluster, ns, {"a": "1"}, "alice")
    resp = cluster.request("PATCH", f"/api/v1/namespaces/{ns}/configmaps/cfg",
                           {"data": {"a": "2"}}, query={"force": "true"},
                           content_type="application/merge-patch+json")
    assert resp.status == 422
    assert resp.json()["message"] == ('PatchOptions.meta.k8s.io "" is invalid: force: '
                                      "Forbidden: may not be specified for non-apply patch")


@SSA_DIFFERENCE
def test_apply_removes_fields_its_manager_dropped(cluster: Cluster, ns: str):
    apply(cluster, ns, {"a": "1", "b": "2"}, "alice")
    resp = apply(cluster, ns, {"a": "1"}, "alice")
    assert resp.status == 200
    assert resp.json()["data"] == {"a": "1"}


@SSA_DIFFERENCE
def test_apply_conflict_with_another_manager(cluster: Cluster, ns: str):
    apply(cluster, ns, {"a": "1"}, "alice")
    resp = apply(cluster, ns, {"a": "2"}, "bob")
    assert resp.status == 409
    assert resp.json() == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "reason": "Conflict", "code": 409,
        "message": 'Apply failed with 1 conflict: conflict with "alice": .data.a',
        "details": {"causes": [{"reason": "FieldManagerConflict",
                                "message": 'conflict with "alice"', "field": ".data.a"}]}}


@SSA_DIFFERENCE
def test_apply_force_takes_ownership(cluster: Cluster, ns: str):
    apply(cluster, ns, {"a": "1"}, "alice")
    resp = apply(cluster, ns, {"a": "2"}, "bob", force=True)
    assert resp.status == 200
    body = resp.json()
    assert body["data"] == {"a": "2"}
    owners = {f["manager"]: f.get("fieldsV1") for f in body["metadata"]["managedFields"]}
    assert "f:a" in owners["bob"]["f:data"]
    assert "f:a" not in (owners.get("alice") or {}).get("f:data", {})


@SSA_DIFFERENCE
def test_shared_ownership_of_the_same_value(cluster: Cluster, ns: str):
    apply(cluster, ns, {"a": "1"}, "alice")
    resp = apply(cluster, ns, {"a": "1", "b": "2"}, "bob")
    assert resp.status == 200
    assert sorted(f["manager"] for f in resp.json()["metadata"]["managedFields"]) == [
        "alice", "bob"]
