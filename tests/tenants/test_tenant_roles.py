"""The ClusterRoles the portal binds in tenant namespaces (deploy/base/tenant-roles.yaml) and the
admission rules for those namespaces (deploy/base/tenant-admission.yaml): valid, what docs/rbac.md
says, and never more. The real API server proves them in tests/realcluster/test_keystone_kubectl.py."""

from __future__ import annotations

from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from kube.labels import LABEL_PROJECT_ID, LABEL_QUEUED, MANAGED_BY, QUEUE_LABEL
from tenants.manifests import (
    PROJECT_CLUSTER_ROLE,
    ROLE_CLUSTER_ROLES,
    NamespaceSpec,
    make_namespace,
    make_role_bindings,
)
from tests.support.rbac import READ, unadmitted

BASE = Path(__file__).resolve().parents[2] / "deploy" / "base"
SPEC = NamespaceSpec(namespace="gpu-vision-lab-abc123", project_id="d964ebf8619749c3",
                     project_name="Vision Lab", gpus_total=1, gpus_by_resource={}, cpu=1,
                     memory_gb=1, max_workloads=1)


def documents(name: str) -> list[dict]:
    return [d for d in yaml.safe_load_all((BASE / name).read_text()) if d]


def rules(name: str) -> list[dict]:
    (role,) = [d for d in documents("tenant-roles.yaml") if d["metadata"]["name"] == name]
    return role.get("rules") or []


def allowed(role: str, group: str, resource: str, verb: str) -> bool:
    return any(group in r["apiGroups"] and resource in r["resources"] and verb in r["verbs"]
               for r in rules(role))


def policy(name: str) -> dict:
    (found,) = [d for d in documents("tenant-admission.yaml")
                if d["kind"] == "ValidatingAdmissionPolicy" and d["metadata"]["name"] == name]
    return found


@pytest.mark.parametrize("name", ["tenant-roles.yaml", "tenant-admission.yaml"])
def test_every_document_is_valid(name):
    assert documents(name)
    for doc in documents(name):
        kubernetes_validate.validate(doc, kubernetes_validate.utils.latest_version(), strict=True)


def test_the_kustomization_installs_them():
    resources = yaml.safe_load((BASE / "kustomization.yaml").read_text())["resources"]
    assert {"tenant-roles.yaml", "tenant-admission.yaml"} <= set(resources)


def test_every_role_a_tenant_namespace_binds_is_the_portals_own():
    bound = {b["roleRef"]["name"] for b in make_role_bindings(SPEC)}
    assert bound == {PROJECT_CLUSTER_ROLE, *ROLE_CLUSTER_ROLES.values()}
    assert bound == {d["metadata"]["name"] for d in documents("tenant-roles.yaml")}
    assert not bound & {"view", "edit", "admin", "cluster-admin"}


ALL = sorted({PROJECT_CLUSTER_ROLE, *ROLE_CLUSTER_ROLES.values()})


@pytest.mark.parametrize("role", ALL)
def test_no_role_reads_secrets_or_writes_what_the_portal_writes(role):
    assert not allowed(role, "", "secrets", "get") and not allowed(role, "", "secrets", "list")
    for group, resource in (("", "pods"), ("", "services"), ("networking.k8s.io", "networkpolicies"),
                            ("apps", "deployments"), ("batch", "jobs"), ("", "configmaps"),
                            ("rbac.authorization.k8s.io", "rolebindings")):
        for verb in ("create", "update", "patch"):
            assert not allowed(role, group, resource, verb), (role, group, resource, verb)
    for rule in rules(role):
        assert "*" not in rule["verbs"] and "*" not in rule["resources"]
        assert not {"escalate", "bind", "impersonate", "deletecollection"} & set(rule["verbs"])


def test_the_reader_reads_pods_logs_and_events_and_nothing_else():
    for resource in ("pods", "pods/log", "events", "services", "resourcequotas"):
        assert allowed(PROJECT_CLUSTER_ROLE, "", resource, "list" if "/" not in resource
                       else "get")
    assert all(set(r["verbs"]) <= READ for r in rules(PROJECT_CLUSTER_ROLE))
    assert not allowed(PROJECT_CLUSTER_ROLE, "", "pods/exec", "create")
    assert not allowed(PROJECT_CLUSTER_ROLE, "", "pods/portforward", "create")


def test_the_manager_adds_exec_port_forward_and_pod_deletion_the_member_nothing():
    """RBAC cannot tell a pod's owner: a member's exec or port-forward would reach the project's
    every workload, those holding another member's own volumes and secrets too."""
    (member,) = [d for d in documents("tenant-roles.yaml")
                 if d["metadata"]["name"] == "gpu-portal-tenant-member"]
    assert "rules" not in member
    for resource in ("pods/exec", "pods/portforward"):
        assert not allowed("gpu-portal-tenant-member", "", resource, "create")
        assert not allowed("gpu-portal-tenant-member", "", resource, "get")
        assert allowed("gpu-portal-tenant-manager", "", resource, "create")
        assert allowed("gpu-portal-tenant-manager", "", resource, "get")
    assert not allowed("gpu-portal-tenant-member", "", "pods", "delete")
    assert allowed("gpu-portal-tenant-manager", "", "pods", "delete")
    assert ROLE_CLUSTER_ROLES["admin"] == ROLE_CLUSTER_ROLES["manager"]


@pytest.mark.parametrize("role", sorted(set(ROLE_CLUSTER_ROLES.values())))
def test_role_group_roles_hold_only_requests_admission_sees(role):
    """Their groups (`gpu-portal:member`, …) are the same in every project: a read in them
    would reach every tenant namespace, since admission never sees a read."""
    assert unadmitted(rules(role)) == []
    assert unadmitted(rules(PROJECT_CLUSTER_ROLE))  # the check can fail


def selects(policy_doc: dict, labels: dict[str, str]) -> bool:
    selector = policy_doc["spec"]["matchConstraints"]["namespaceSelector"]
    return all(labels.get(e["key"]) in e["values"] if e["operator"] == "In" else e["key"] in labels
               for e in selector["matchExpressions"])


@pytest.mark.parametrize("name", ["gpu-portal-keystone-project-fence", "gpu-portal-tenant-guard"])
def test_the_policies_select_tenant_namespaces_only_and_are_bound_to_deny(name):
    labels = make_namespace(SPEC)["metadata"]["labels"]
    assert selects(policy(name), labels)
    assert not selects(policy(name), {"kubernetes.io/metadata.name": "gpu-portal"})
    (binding,) = [d for d in documents("tenant-admission.yaml")
                  if d["kind"] == "ValidatingAdmissionPolicyBinding"
                  and d["spec"]["policyName"] == name]
    assert binding["spec"]["validationActions"] == ["Deny"]
    assert "paramRef" not in binding["spec"] and "matchResources" not in binding["spec"]
    assert policy(name)["spec"]["failurePolicy"] == "Fail"


def test_the_policies_spell_the_portals_labels():
    """The CEL expressions name labels as strings: the ones kube/labels.py writes."""
    text = (BASE / "tenant-admission.yaml").read_text()
    for label in (LABEL_PROJECT_ID, LABEL_QUEUED, QUEUE_LABEL, *MANAGED_BY):
        assert f"'{label}'" in text or f"key: {label}," in text, label
    assert "'system:serviceaccount:gpu-portal:gpu-portal'" in text
    assert "alpha.kubernetes.io/identity/project/id" in text


def test_the_own_pods_rule_names_the_file_servers_pods_and_no_workloads():
    """The rule reads a CONNECT's pod name only: the file server's Deployment name is the prefix
    its pods carry, and a workload's Kubernetes name can never start with it."""
    from files.manifests import NAME
    from kube.labels import workload_object_name

    rule = policy("gpu-portal-own-pods")
    (check,) = rule["spec"]["validations"]
    assert f"!request.name.startsWith('{NAME}-')" in check["expression"]
    resources = {r for rr in rule["spec"]["matchConstraints"]["resourceRules"]
                 for r in rr["resources"]}
    assert resources == {"pods/exec", "pods/attach", "pods/portforward"}
    assert not workload_object_name(7, NAME).startswith(f"{NAME}-")
