"""deploy/keystone-auth matches the RoleBindings the portal creates (tenants/manifests.py): for
what k8s-keystone-auth reports about a Keystone token (its role mappings included), Kubernetes
RBAC grants in the tenant's namespace exactly what the token's role allows; in another tenant's
namespace only what the admission fence (deploy/base/tenant-admission.yaml) stops."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tenants.manifests import (
    PROJECT_CLUSTER_ROLE,
    ROLE_CLUSTER_ROLES,
    NamespaceSpec,
    make_namespace,
    make_role_bindings,
)
from tests.deploy.manifests import REPO, find, render, settings_config_map
from tests.support.rbac import unadmitted

WEBHOOK = "deploy/keystone-auth"
# Keystone's bootstrap roles imply the lower ones, and tokens carry them expanded
IMPLIED = {"reader": ["reader"], "member": ["member", "reader"],
           "manager": ["manager", "member", "reader"],
           "admin": ["admin", "manager", "member", "reader"]}
PROJECT = ("0b6c2cbf3d6e4a4b8f3c5d2e1a9f7c11", "vision-lab")
OTHER = ("7e1d9a0c4b2f4e6d8a3c1b5f9e2d4c77", "nlp-lab")
SYNC_CONFIG_DIR = "/etc/k8s-keystone-auth"


def webhook_container() -> dict[str, Any]:
    (container,) = find(render(WEBHOOK), "Deployment", "k8s-keystone-auth")["spec"]["template"][
        "spec"]["containers"]
    return container


def webhook_args() -> dict[str, str]:
    return dict(arg.split("=", 1) for arg in webhook_container()["args"] if "=" in arg)


def role_mappings() -> list[dict[str, Any]]:
    """The role mappings the rendered webhook runs with: the sync config file it is given, from
    the ConfigMap mounted where the flag points."""
    objects = render(WEBHOOK)
    path = webhook_args()["--sync-config-file"]
    assert path.startswith(SYNC_CONFIG_DIR + "/")
    pod = find(objects, "Deployment", "k8s-keystone-auth")["spec"]["template"]["spec"]
    (mount,) = [m for m in webhook_container()["volumeMounts"]
                if m["mountPath"] == SYNC_CONFIG_DIR]
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    config_map = find(objects, "ConfigMap", volume["configMap"]["name"])
    config = yaml.safe_load(config_map["data"][path.rpartition("/")[2]])
    assert not config.get("data-types-to-sync"), "no namespace or RoleBinding sync"
    return config["role-mappings"]


def reported_groups(project: tuple[str, str], role: str) -> list[str]:
    """The groups of k8s-keystone-auth's TokenReview answer for a token scoped to `project`
    with `role` (cloud-provider-openstack pkg/identity/keystone: the user's Keystone group
    names, none here, and the project id; then each role mapping whose keystone-role the token
    holds adds its fixed groups, whatever the project)."""
    groups = [project[0]]
    for mapping in role_mappings():
        if mapping.get("keystone-role") in IMPLIED[role]:
            groups += mapping.get("groups", [])
    return groups


def namespace_spec(project: tuple[str, str]) -> NamespaceSpec:
    """The project's namespace with the group formats the deployed portal is configured with."""
    settings = settings_config_map(render("deploy/overlays/production"))
    return NamespaceSpec(
        namespace=f"gpu-{project[1]}", project_id=project[0], project_name=project[1],
        gpus_total=1, gpus_by_resource={}, cpu=1, memory_gb=1, max_workloads=1,
        project_group_format=settings["PORTAL_RBAC_PROJECT_GROUP_FORMAT"],
        role_group_format=settings["PORTAL_RBAC_ROLE_GROUP_FORMAT"],
    )


def granted(project: tuple[str, str], groups: list[str]) -> set[str]:
    """The ClusterRoles RBAC grants a user with these groups through the RoleBindings of the
    project's namespace."""
    return {b["roleRef"]["name"] for b in make_role_bindings(namespace_spec(project))
            for s in b["subjects"] if s["kind"] == "Group" and s["name"] in groups}


def cluster_role_rules(name: str) -> list[dict[str, Any]]:
    return find(render("deploy/overlays/production"), "ClusterRole", name).get("rules") or []


def fence() -> dict[str, Any]:
    return find(render("deploy/overlays/production"), "ValidatingAdmissionPolicy",
                "gpu-portal-keystone-project-fence")


EXPECTED = {"reader": {PROJECT_CLUSTER_ROLE},
            "member": {PROJECT_CLUSTER_ROLE, "gpu-portal-tenant-member"},
            "manager": {PROJECT_CLUSTER_ROLE, "gpu-portal-tenant-member",
                        "gpu-portal-tenant-manager"},
            "admin": {PROJECT_CLUSTER_ROLE, "gpu-portal-tenant-member",
                      "gpu-portal-tenant-manager"}}


@pytest.mark.parametrize("role", sorted(IMPLIED))
def test_each_role_gets_its_cluster_roles_in_its_own_namespace(role):
    assert granted(PROJECT, reported_groups(PROJECT, role)) == EXPECTED[role]


@pytest.mark.parametrize("role", sorted(IMPLIED))
def test_in_another_namespace_rbac_grants_only_what_admission_fences(role):
    """A role group names no project: RBAC grants the member's and manager's ClusterRoles in
    every tenant namespace. Those hold only requests that pass admission, and the fence (which
    selects every tenant namespace) refuses them to a token of another project. Reads stay with
    the project-id group, which is the token's own project."""
    elsewhere = granted(OTHER, reported_groups(PROJECT, role))
    assert PROJECT_CLUSTER_ROLE not in elsewhere
    for name in elsewhere:
        assert unadmitted(cluster_role_rules(name)) == [], name
    # the fence selects the other project's namespace as the portal labels it
    labels = make_namespace(namespace_spec(OTHER))["metadata"]["labels"]
    for expression in fence()["spec"]["matchConstraints"]["namespaceSelector"]["matchExpressions"]:
        assert expression["key"] in labels
        assert expression["operator"] == "Exists" or labels[expression["key"]] in \
            expression["values"]
    (rule,) = fence()["spec"]["matchConstraints"]["resourceRules"]
    assert set(rule["operations"]) == {"CREATE", "UPDATE", "DELETE", "CONNECT"}
    assert rule["resources"] == ["*/*"]  # every resource and subresource


def test_every_binding_of_the_portal_can_be_matched():
    """No dead RoleBinding: each names a group some token of the project is reported with."""
    reachable = {group for role in IMPLIED for group in reported_groups(PROJECT, role)}
    for binding in make_role_bindings(namespace_spec(PROJECT)):
        assert {s["name"] for s in binding["subjects"]} <= reachable, binding["metadata"]["name"]
    assert set(ROLE_CLUSTER_ROLES) == {m["keystone-role"] for m in role_mappings()}


def test_webhook_trusts_the_portals_keystone_and_may_only_read_config_maps():
    """The role mappings start its Kubernetes client and a ConfigMap informer over every
    namespace (its source): that, and nothing else, is what it may do."""
    settings = settings_config_map(render("deploy/overlays/production"))
    assert webhook_args()["--keystone-url"] == settings["KEYSTONE_URL"]
    objects = render(WEBHOOK)
    rbac = [o for o in objects if o["kind"] in ("Role", "ClusterRole", "RoleBinding",
                                                 "ClusterRoleBinding")]
    assert sorted(o["kind"] for o in rbac) == ["ClusterRole", "ClusterRoleBinding"]
    assert find(objects, "ClusterRole", "k8s-keystone-auth")["rules"] == [
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]}]
    (subject,) = find(objects, "ClusterRoleBinding", "k8s-keystone-auth")["subjects"]
    pod = find(objects, "Deployment", "k8s-keystone-auth")["spec"]["template"]["spec"]
    assert (subject["name"], subject["namespace"]) == (pod["serviceAccountName"], "kube-system")
    assert not {"--keystone-policy-file", "--policy-configmap-name"} & set(webhook_args())


def test_api_server_webhook_config_calls_the_service():
    config = yaml.safe_load(
        (REPO / "deploy" / "keystone-auth" / "apiserver" / "webhook-kubeconfig.yaml").read_text())
    (cluster,) = config["clusters"]
    service = find(render(WEBHOOK), "Service", "k8s-keystone-auth")["spec"]
    (port,) = service["ports"]
    assert cluster["cluster"]["server"] == f"https://SERVICE_IP:{port['port']}/webhook"
    assert "insecure-skip-tls-verify" not in cluster["cluster"]
    listen = dict(a.split("=", 1) for a in webhook_container()["args"] if "=" in a)["--listen"]
    assert listen.endswith(f":{webhook_container()['ports'][0]['containerPort']}")
