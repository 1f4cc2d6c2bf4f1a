"""Object semantics over the official client: CRUD, patches, deletion, namespaces."""

from __future__ import annotations

import json
import re
import time

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.support.waiting import eventually

RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


def pod_body(name: str | None = None, *, generate: str | None = None, labels=None) -> dict:
    meta: dict = {"labels": labels or {}}
    if name:
        meta["name"] = name
    if generate:
        meta["generateName"] = generate
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {
            "containers": [
                {"name": "app", "image": "busybox:1.36", "env": [{"name": "A", "value": "1"}]}
            ]
        },
    }


def status_of(exc: ApiException) -> dict:
    return json.loads(exc.body)


def test_create_assigns_identity(core, raw, kube_namespace):
    a = core.create_namespaced_pod(kube_namespace, pod_body(generate="web-"))
    b = core.create_namespaced_pod(kube_namespace, pod_body(generate="web-"))
    assert a.metadata.name.startswith("web-") and len(a.metadata.name) == len("web-") + 5
    assert a.metadata.name != b.metadata.name and a.metadata.uid != b.metadata.uid
    assert int(b.metadata.resource_version) > int(a.metadata.resource_version)
    assert a.metadata.generation == 1
    assert a.kind == "Pod" and a.api_version == "v1"
    assert a.status.phase == "Pending"
    # defaulting like the real server
    assert a.spec.restart_policy == "Always" and a.spec.scheduler_name == "default-scheduler"
    _, body = raw.json("GET", f"/api/v1/namespaces/{kube_namespace}/pods/{a.metadata.name}")
    assert RFC3339.match(body["metadata"]["creationTimestamp"])
    assert isinstance(body["metadata"]["resourceVersion"], str)


def test_get_missing_is_404_status(core, kube_namespace):
    with pytest.raises(ApiException) as e:
        core.read_namespaced_pod("nope", kube_namespace)
    assert e.value.status == 404
    assert status_of(e.value) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'pods "nope" not found',
        "reason": "NotFound",
        "details": {"name": "nope", "kind": "pods"},
        "code": 404,
    }
    with pytest.raises(ApiException) as e:
        client.AppsV1Api(core.api_client).read_namespaced_deployment("web", kube_namespace)
    assert status_of(e.value)["message"] == 'deployments.apps "web" not found'
    assert status_of(e.value)["details"] == {"name": "web", "group": "apps", "kind": "deployments"}


def test_create_twice_is_already_exists(core, kube_namespace):
    core.create_namespaced_config_map(kube_namespace, {"metadata": {"name": "cm"}})
    with pytest.raises(ApiException) as e:
        core.create_namespaced_config_map(kube_namespace, {"metadata": {"name": "cm"}})
    body = status_of(e.value)
    assert (e.value.status, body["reason"], body["message"]) == (
        409,
        "AlreadyExists",
        'configmaps "cm" already exists',
    )
    assert body["details"] == {"name": "cm", "kind": "configmaps"}


def test_create_in_missing_namespace_is_404(core):
    with pytest.raises(ApiException) as e:
        core.create_namespaced_config_map("no-such-ns", {"metadata": {"name": "cm"}})
    body = status_of(e.value)
    assert (e.value.status, body["message"]) == (404, 'namespaces "no-such-ns" not found')
    assert body["details"] == {"name": "no-such-ns", "kind": "namespaces"}


def test_update_with_stale_resource_version_conflicts(core, kube_namespace):
    cm = core.create_namespaced_config_map(
        kube_namespace, {"metadata": {"name": "cm"}, "data": {"a": "1"}}
    )
    cm.data = {"a": "2"}
    updated = core.replace_namespaced_config_map("cm", kube_namespace, cm)
    assert int(updated.metadata.resource_version) > int(cm.metadata.resource_version)
    cm.data = {"a": "3"}  # still carries the old resourceVersion
    with pytest.raises(ApiException) as e:
        core.replace_namespaced_config_map("cm", kube_namespace, cm)
    body = status_of(e.value)
    assert e.value.status == 409 and body["reason"] == "Conflict"
    assert body["message"] == (
        'Operation cannot be fulfilled on configmaps "cm": the object has been modified; '
        "please apply your changes to the latest version and try again"
    )
    assert core.read_namespaced_config_map("cm", kube_namespace).data == {"a": "2"}


def test_generation_tracks_spec_and_status_is_separate(api_client, kube_namespace):
    apps = client.AppsV1Api(api_client)
    dep = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "a", "image": "nginx"}]},
            },
        },
    }
    created = apps.create_namespaced_deployment(kube_namespace, dep)
    assert created.metadata.generation == 1
    labelled = apps.patch_namespaced_deployment(
        "web", kube_namespace, {"metadata": {"labels": {"x": "y"}}}
    )
    assert labelled.metadata.generation == 1
    scaled = apps.patch_namespaced_deployment(
        "web", kube_namespace, {"spec": {"replicas": 0, "paused": True}}
    )
    assert scaled.metadata.generation == 2
    # the main resource ignores status; the status subresource ignores the rest
    ignored = apps.patch_namespaced_deployment(
        "web", kube_namespace, {"status": {"observedGeneration": 99}}
    )
    assert ignored.status is None or ignored.status.observed_generation != 99
    status = apps.patch_namespaced_deployment_status(
        "web", kube_namespace, {"status": {"observedGeneration": 99}, "spec": {"replicas": 5}}
    )
    assert status.status.observed_generation == 99 and status.spec.replicas == 0


def test_patch_flavours(core, apps, raw, kube_namespace):
    core.create_namespaced_pod(kube_namespace, pod_body("p"))
    # strategic merge: containers merge by name, env by name (on a Deployment's template: a
    # pod's spec is immutable but for images and a few fields, as on a real API server)
    template = pod_body()
    template["metadata"]["labels"] = {"app": "smp"}
    apps.create_namespaced_deployment(kube_namespace, {
        "metadata": {"name": "smp"},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "smp"}},
                 "template": {"metadata": template["metadata"], "spec": template["spec"]}}})
    smp = {"spec": {"template": {"spec": {"containers": [
        {"name": "app", "env": [{"name": "B", "value": "2"}]}]}}}}
    spec = apps.patch_namespaced_deployment("smp", kube_namespace, smp).spec.template.spec
    assert [(e.name, e.value) for e in spec.containers[0].env] == [("A", "1"), ("B", "2")]
    assert spec.containers[0].image == "busybox:1.36"
    # $patch: delete removes one keyed element
    smp = {"spec": {"template": {"spec": {"containers": [
        {"name": "app", "env": [{"name": "A", "$patch": "delete"}]}]}}}}
    spec = apps.patch_namespaced_deployment("smp", kube_namespace, smp).spec.template.spec
    assert [e.name for e in spec.containers[0].env] == ["B"]
    # changing a pod's env is refused
    with pytest.raises(ApiException) as refused:
        core.patch_namespaced_pod("p", kube_namespace, {"spec": {"containers": [
            {"name": "app", "env": [{"name": "B", "value": "2"}]}]}})
    assert refused.value.status == 422
    # merge patch (RFC 7386): lists replace, null deletes
    core.patch_namespaced_pod("p", kube_namespace, {"metadata": {"labels": {"gone": "x"}}})
    status, _ = raw.json(
        "PATCH",
        f"/api/v1/namespaces/{kube_namespace}/pods/p",
        {"metadata": {"labels": {"a": "b", "gone": None}}},
        content_type="application/merge-patch+json",
    )
    assert status == 200
    assert core.read_namespaced_pod("p", kube_namespace).metadata.labels == {"a": "b"}
    # JSON patch (RFC 6902)
    ops = [
        {"op": "add", "path": "/metadata/labels/c", "value": "d"},
        {"op": "replace", "path": "/spec/containers/0/image", "value": "busybox:1.37"},
    ]
    pod = core.patch_namespaced_pod("p", kube_namespace, ops)
    assert pod.metadata.labels == {"a": "b", "c": "d"}
    assert pod.spec.containers[0].image == "busybox:1.37"


def test_patch_with_stale_resource_version_conflicts(core, kube_namespace):
    cm = core.create_namespaced_config_map(kube_namespace, {"metadata": {"name": "cm"}})
    core.patch_namespaced_config_map("cm", kube_namespace, {"data": {"a": "1"}})
    with pytest.raises(ApiException) as e:
        core.patch_namespaced_config_map(
            "cm",
            kube_namespace,
            {"metadata": {"resourceVersion": cm.metadata.resource_version}, "data": {"a": "2"}},
        )
    assert e.value.status == 409 and status_of(e.value)["reason"] == "Conflict"


def test_server_side_apply_creates_then_updates(raw, kube_namespace):
    path = f"/api/v1/namespaces/{kube_namespace}/configmaps/ssa?fieldManager=test"
    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "ssa"},
        "data": {"a": "1"},
    }
    status, created = raw.json("PATCH", path, body, content_type="application/apply-patch+yaml")
    assert status == 201 and created["data"] == {"a": "1"}
    body["data"] = {"a": "2"}
    status, updated = raw.json("PATCH", path, body, content_type="application/apply-patch+yaml")
    assert status == 200 and updated["data"] == {"a": "2"}
    status, err = raw.json(
        "PATCH", path.split("?")[0], body, content_type="application/apply-patch+yaml"
    )
    assert status == 422 and "fieldManager" in err["message"]  # PatchOptions Invalid


def test_dry_run_changes_nothing(core, kube_namespace):
    made = core.create_namespaced_config_map(
        kube_namespace, {"metadata": {"name": "dry"}}, dry_run="All"
    )
    assert made.metadata.name == "dry"
    with pytest.raises(ApiException):
        core.read_namespaced_config_map("dry", kube_namespace)
    core.create_namespaced_config_map(kube_namespace, {"metadata": {"name": "real"}})
    core.delete_namespaced_config_map("real", kube_namespace, dry_run="All")
    assert core.read_namespaced_config_map("real", kube_namespace)


def test_delete_returns_status_and_pods_return_object(raw, core, kube_namespace):
    core.create_namespaced_config_map(kube_namespace, {"metadata": {"name": "cm"}})
    status, body = raw.json(
        "DELETE",
        f"/api/v1/namespaces/{kube_namespace}/configmaps/cm",
        {"propagationPolicy": "Background"},
    )
    assert status == 200 and body["kind"] == "Status" and body["status"] == "Success"
    assert body["details"]["name"] == "cm" and body["details"]["kind"] == "configmaps"
    core.create_namespaced_pod(kube_namespace, pod_body("p"))
    status, body = raw.json("DELETE", f"/api/v1/namespaces/{kube_namespace}/pods/p")
    assert status == 200 and body["kind"] == "Pod"

    # a pod already on a node ends gracefully (its kubelet finishes it; a delete meanwhile is
    # answered 200 again): once gone, a delete is 404
    def gone() -> dict:
        status, body = raw.json("DELETE", f"/api/v1/namespaces/{kube_namespace}/pods/p")
        assert status == 404, (status, body)
        return body

    assert eventually(gone, timeout=10)["message"] == 'pods "p" not found'


def test_finalizers_hold_deletion(core, kube_namespace):
    core.create_namespaced_config_map(
        kube_namespace, {"metadata": {"name": "held", "finalizers": ["example.com/hold"]}}
    )
    core.delete_namespaced_config_map("held", kube_namespace)
    held = core.read_namespaced_config_map("held", kube_namespace)
    assert held.metadata.deletion_timestamp is not None
    core.patch_namespaced_config_map(
        "held", kube_namespace, [{"op": "remove", "path": "/metadata/finalizers"}]
    )
    with pytest.raises(ApiException) as e:
        core.read_namespaced_config_map("held", kube_namespace)
    assert e.value.status == 404


def test_propagation_policies(core, kube_namespace):
    owner = core.create_namespaced_config_map(kube_namespace, {"metadata": {"name": "owner"}})
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner.metadata.uid}
    for name in ("dep1", "dep2"):
        core.create_namespaced_config_map(
            kube_namespace, {"metadata": {"name": name, "ownerReferences": [ref]}}
        )
    # Orphan: dependents stay, without the owner reference
    core.delete_namespaced_config_map("owner", kube_namespace, propagation_policy="Orphan")
    assert not core.read_namespaced_config_map("dep1", kube_namespace).metadata.owner_references
    # Foreground: dependents go first, then the owner
    owner = core.create_namespaced_config_map(kube_namespace, {"metadata": {"name": "owner2"}})
    ref = dict(ref, name="owner2", uid=owner.metadata.uid)
    core.create_namespaced_config_map(
        kube_namespace, {"metadata": {"name": "dep3", "ownerReferences": [ref]}}
    )
    core.delete_namespaced_config_map(
        "owner2", kube_namespace, body=client.V1DeleteOptions(propagation_policy="Foreground")
    )
    names = {c.metadata.name for c in core.list_namespaced_config_map(kube_namespace).items}
    assert "dep3" not in names and "owner2" not in names and "dep1" in names


def test_delete_collection_with_selector(core, kube_namespace):
    for i in range(4):
        core.create_namespaced_config_map(
            kube_namespace, {"metadata": {"name": f"c{i}", "labels": {"even": str(i % 2 == 0)}}}
        )
    core.delete_collection_namespaced_config_map(kube_namespace, label_selector="even=True")
    left = sorted(c.metadata.name for c in core.list_namespaced_config_map(kube_namespace).items)
    assert left == ["c1", "c3"]


def test_namespace_deletion_removes_contents(core):
    core.create_namespace({"metadata": {"name": "doomed"}})
    core.create_namespaced_config_map("doomed", {"metadata": {"name": "cm"}})
    core.delete_namespace("doomed")
    assert core.read_namespace("doomed").status.phase == "Terminating"
    with pytest.raises(ApiException) as e:
        core.create_namespaced_config_map("doomed", {"metadata": {"name": "late"}})
    assert e.value.status == 403
    assert "because it is being terminated" in status_of(e.value)["message"]
    def namespace_gone() -> bool:
        try:
            core.read_namespace("doomed")
        except ApiException as exc:
            if exc.status != 404:
                pytest.fail(f"reading the namespace failed: {exc}")  # no use waiting
            return True
        return False

    eventually(namespace_gone, timeout=5, interval=0.05, message="namespace was not deleted")
    assert core.list_namespaced_config_map("doomed").items == []


def test_every_group_round_trips(api_client, kube_namespace):
    ns = kube_namespace
    batch = client.BatchV1Api(api_client)
    job = batch.create_namespaced_job(
        ns,
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "j"},
            "spec": {
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": "c", "image": "busybox"}],
                    }
                }
            },
        },
    )
    assert job.spec.selector.match_labels["batch.kubernetes.io/controller-uid"] == job.metadata.uid
    assert batch.read_namespaced_job("j", ns).spec.backoff_limit == 6
    net = client.NetworkingV1Api(api_client)
    net.create_namespaced_network_policy(
        ns, {"metadata": {"name": "deny"}, "spec": {"podSelector": {}, "policyTypes": ["Ingress"]}}
    )
    assert [p.metadata.name for p in net.list_namespaced_network_policy(ns).items] == ["deny"]
    rbac = client.RbacAuthorizationV1Api(api_client)
    rbac.create_namespaced_role(
        ns,
        {
            "metadata": {"name": "r"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}],
        },
    )
    rbac.create_namespaced_role_binding(
        ns,
        {
            "metadata": {"name": "rb"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"},
            "subjects": [
                {"kind": "Group", "name": "proj", "apiGroup": "rbac.authorization.k8s.io"}
            ],
        },
    )
    name = f"cr-{ns}"
    rbac.create_cluster_role({"metadata": {"name": name}, "rules": []})
    rbac.create_cluster_role_binding(
        {
            "metadata": {"name": name},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": name,
            },
        }
    )
    assert rbac.read_cluster_role_binding(name).role_ref.name == name
    rbac.delete_cluster_role_binding(name)
    rbac.delete_cluster_role(name)
    core = client.CoreV1Api(api_client)
    core.create_namespaced_secret(ns, {"metadata": {"name": "s"}, "stringData": {"k": "v"}})
    assert core.read_namespaced_secret("s", ns).type == "Opaque"
    core.create_namespaced_service_account(
        ns, {"metadata": {"name": "sa"}, "automountServiceAccountToken": False}
    )
    core.create_namespaced_resource_quota(
        ns, {"metadata": {"name": "q"}, "spec": {"hard": {"requests.nvidia.com/gpu": "4"}}}
    )
    core.create_namespaced_limit_range(
        ns,
        {
            "metadata": {"name": "lr"},
            "spec": {"limits": [{"type": "Container", "default": {"cpu": "1"}}]},
        },
    )
    core.create_namespaced_persistent_volume_claim(
        ns,
        {
            "metadata": {"name": "pvc"},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}},
            },
        },
    )
    svc = core.create_namespaced_service(
        ns,
        {
            "metadata": {"name": "svc"},
            "spec": {"type": "LoadBalancer", "selector": {"app": "x"}, "ports": [{"port": 80}]},
        },
    )
    assert svc.spec.cluster_ip and svc.spec.ports[0].target_port == 80
    assert svc.spec.ports[0].node_port >= 30000
    core.create_namespaced_endpoints(ns, {"metadata": {"name": "ep"}, "subsets": []})
    core.create_namespaced_event(
        ns,
        {
            "metadata": {"name": "ev1"},
            "involvedObject": {"kind": "Pod", "name": "x", "namespace": ns},
            "reason": "Test",
            "message": "hello",
            "type": "Normal",
        },
    )
    assert core.list_namespaced_event(ns, field_selector="reason=Test").items[0].message == "hello"


def test_a_body_that_arrives_in_pieces_is_read_whole(kubesim, core, kube_namespace):
    """A large object sent in several chunks with pauses between them (as a busy client or
    network delivers it) is created whole, not cut at the first packet."""
    import http.client
    from urllib.parse import urlsplit

    body = json.dumps({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "pieces"},
        "data": {f"key{i}": "v" * 200 for i in range(40)},
    }).encode()

    def pieces():
        for start in range(0, len(body), 1000):
            yield body[start:start + 1000]
            time.sleep(0.05)

    url = urlsplit(kubesim.url)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
    conn.request("POST", f"/api/v1/namespaces/{kube_namespace}/configmaps", body=pieces(),
                 headers={"Content-Type": "application/json", **kubesim.headers()},
                 encode_chunked=True)
    response = conn.getresponse()
    assert response.status == 201, response.read()[:500]
    conn.close()
    stored = core.read_namespaced_config_map("pieces", kube_namespace)
    assert stored.data == {f"key{i}": "v" * 200 for i in range(40)}
