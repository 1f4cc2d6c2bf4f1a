"""The portal's own ClusterRole: valid, and least privilege."""

from pathlib import Path

import kubernetes_validate
import yaml

from kube.client import KINDS
from tenants.manifests import (
    PROJECT_CLUSTER_ROLE,
    ROLE_CLUSTER_ROLES,
    NamespaceSpec,
    tenant_objects,
)

RBAC = Path(__file__).resolve().parents[2] / "deploy" / "base" / "portal-rbac.yaml"


def documents():
    return [d for d in yaml.safe_load_all(RBAC.read_text()) if d]


def cluster_role():
    return next(d for d in documents() if d["kind"] == "ClusterRole")


def test_every_document_is_valid():
    assert documents()
    for doc in documents():
        kubernetes_validate.validate(doc, kubernetes_validate.utils.latest_version(), strict=True)


def test_bind_only_on_the_cluster_roles_the_portal_binds_and_no_escalation():
    rules = cluster_role()["rules"]
    bind = [r for r in rules if "bind" in r["verbs"]]
    assert bind == [{"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"],
                     "verbs": ["bind"], "resourceNames": [
                         "gpu-portal-tenant-reader", "gpu-portal-tenant-member",
                         "gpu-portal-tenant-manager"]}]
    assert sorted({PROJECT_CLUSTER_ROLE, *ROLE_CLUSTER_ROLES.values()}) == sorted(
        bind[0]["resourceNames"])
    for rule in rules:
        assert not {"escalate", "impersonate", "*"} & set(rule["verbs"])
        assert "*" not in rule["resources"]


PLURALS = {"Namespace": "namespaces", "ResourceQuota": "resourcequotas",
           "LimitRange": "limitranges", "NetworkPolicy": "networkpolicies",
           "ServiceAccount": "serviceaccounts", "RoleBinding": "rolebindings"}


def _allows(rules, group: str, resource: str, verb: str) -> bool:
    return any(group in r["apiGroups"] and resource in r["resources"] and verb in r["verbs"]
               and "resourceNames" not in r for r in rules)


def test_the_portal_may_create_everything_a_tenant_namespace_holds():
    spec = NamespaceSpec(namespace="n", project_id="p", project_name="p", gpus_total=1,
                         gpus_by_resource={}, cpu=1, memory_gb=1, max_workloads=1)
    rules = cluster_role()["rules"]
    for obj in tenant_objects(spec):
        group = obj["apiVersion"].rpartition("/")[0]
        resource = PLURALS[obj["kind"]]
        for verb in ("get", "create", "update", "patch"):
            assert _allows(rules, group, resource, verb), (group, resource, verb)


def test_pods_are_read_only():
    rules = cluster_role()["rules"]
    assert _allows(rules, "", "pods", "list")
    assert not _allows(rules, "", "pods", "create") and not _allows(rules, "", "pods", "delete")
    assert "Pod" in KINDS  # the client reads pods; writes go through their owners


def test_volumes_claims_are_the_portals_and_storage_classes_only_read():
    """It makes, grows and deletes the volumes' claims and watches them; it reads the storage
    classes an admin offers; of PersistentVolumes it makes and deletes only the datasets'
    (storage/manifests.py), never changing one in place: a provisioned volume is the
    provisioner's."""
    rules = cluster_role()["rules"]
    for verb in ("create", "patch", "delete", "list", "watch"):
        assert _allows(rules, "", "persistentvolumeclaims", verb), verb
    assert _allows(rules, "storage.k8s.io", "storageclasses", "get")
    assert not _allows(rules, "storage.k8s.io", "storageclasses", "create")
    for verb in ("get", "list", "create", "delete"):
        assert _allows(rules, "", "persistentvolumes", verb), verb
    for verb in ("update", "patch", "deletecollection"):
        assert not _allows(rules, "", "persistentvolumes", verb), verb
