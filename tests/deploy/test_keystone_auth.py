"""deploy/keystone-auth matches the RoleBindings the portal creates (tenants/manifests.py): for
what k8s-keystone-auth reports about a Keystone token, Kubernetes RBAC grants in the tenant's
namespace exactly what the token's role allows, and nothing in another tenant's namespace."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tenants.manifests import ROLE_CLUSTER_ROLES, NamespaceSpec, make_role_bindings
from tests.deploy.manifests import REPO, find, render, settings_config_map

WEBHOOK = "deploy/keystone-auth"
# Keystone's bootstrap roles imply the lower ones, and tokens carry them expanded (FACTS.md)
IMPLIED = {"reader": ["reader"], "member": ["member", "reader"],
           "manager": ["manager", "member", "reader"],
           "admin": ["admin", "manager", "member", "reader"]}
PROJECT = ("0b6c2cbf3d6e4a4b8f3c5d2e1a9f7c11", "vision-lab")
OTHER = ("7e1d9a0c4b2f4e6d8a3c1b5f9e2d4c77", "nlp-lab")
# flags that give k8s-keystone-auth a sync configuration (its role mappings) or an
# authorization policy; without them it authenticates only and RBAC decides
CONFIG_FLAGS = {"--sync-config-file", "--sync-configmap-name", "--policy-configmap-name",
                "--keystone-policy-file"}


def webhook_container() -> dict[str, Any]:
    (container,) = find(render(WEBHOOK), "Deployment", "k8s-keystone-auth")["spec"]["template"][
        "spec"]["containers"]
    return container


def role_mappings() -> list[dict[str, Any]]:
    """The role mappings the rendered webhook runs with."""
    flags = {arg.split("=")[0] for arg in webhook_container()["args"] if arg.startswith("--")}
    assert not flags & CONFIG_FLAGS, "a sync config or policy: teach this test its mappings"
    return []


def reported_groups(project: tuple[str, str], role: str, keystone_groups: list[str]) -> list[str]:
    """The groups of k8s-keystone-auth's TokenReview answer for a token scoped to `project`
    with `role` (cloud-provider-openstack pkg/identity/keystone: the user's Keystone group
    names and the project id; then each role mapping whose keystone-role the token holds adds
    its fixed groups)."""
    groups = [*keystone_groups, project[0]]
    for mapping in role_mappings():
        if mapping.get("keystone-role") in IMPLIED[role]:
            groups += mapping.get("groups", [])
    return groups


def namespace_bindings(project: tuple[str, str]) -> list[dict[str, Any]]:
    """The RoleBindings the portal creates in the project's namespace, with the group formats
    the deployed portal is configured with."""
    settings = settings_config_map(render("deploy/overlays/production"))
    spec = NamespaceSpec(
        namespace=f"gpu-{project[1]}", project_id=project[0], project_name=project[1],
        gpus_total=1, gpus_by_resource={}, cpu=1, memory_gb=1, max_workloads=1,
        project_group_format=settings["PORTAL_RBAC_PROJECT_GROUP_FORMAT"],
        role_group_format=settings["PORTAL_RBAC_ROLE_GROUP_FORMAT"],
    )
    return make_role_bindings(spec)


def granted(bindings: list[dict[str, Any]], groups: list[str]) -> set[str]:
    """The ClusterRoles RBAC grants a user with these groups through these RoleBindings."""
    return {b["roleRef"]["name"] for b in bindings
            for s in b["subjects"] if s["kind"] == "Group" and s["name"] in groups}


def role_groups(project: tuple[str, str], role: str) -> list[str]:
    """Keystone groups named by PORTAL_RBAC_ROLE_GROUP_FORMAT, one per role the user holds:
    what the guide asks a site to keep for role-level kubectl access."""
    settings = settings_config_map(render("deploy/overlays/production"))
    return [settings["PORTAL_RBAC_ROLE_GROUP_FORMAT"].format(
        project_id=project[0], project_name=project[1], role=r) for r in IMPLIED[role]]


@pytest.mark.parametrize("role", sorted(IMPLIED))
def test_every_project_member_may_view_its_own_namespace_only(role):
    groups = reported_groups(PROJECT, role, keystone_groups=[])
    assert granted(namespace_bindings(PROJECT), groups) == {"view"}
    assert granted(namespace_bindings(OTHER), groups) == set()


@pytest.mark.parametrize("role", sorted(IMPLIED))
def test_role_groups_grant_what_the_role_allows_in_that_project_only(role):
    groups = reported_groups(PROJECT, role, keystone_groups=role_groups(PROJECT, role))
    expected = {"view"} | {ROLE_CLUSTER_ROLES[r] for r in IMPLIED[role]}
    assert granted(namespace_bindings(PROJECT), groups) == expected
    assert granted(namespace_bindings(OTHER), groups) == set()


def test_every_binding_of_the_portal_can_be_matched():
    """No dead RoleBinding: each names a group some token of the project is reported with."""
    bindings = namespace_bindings(PROJECT)
    reachable = {group for role in IMPLIED
                 for group in reported_groups(PROJECT, role, role_groups(PROJECT, role))}
    for binding in bindings:
        assert {s["name"] for s in binding["subjects"]} <= reachable, binding["metadata"]["name"]


def test_webhook_trusts_the_portals_keystone_and_holds_no_cluster_credentials():
    args = dict(arg.split("=", 1) for arg in webhook_container()["args"] if "=" in arg)
    settings = settings_config_map(render("deploy/overlays/production"))
    assert args["--keystone-url"] == settings["KEYSTONE_URL"]
    pod = find(render(WEBHOOK), "Deployment", "k8s-keystone-auth")["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False  # authentication needs no API access
    assert not [o for o in render(WEBHOOK) if o["kind"] in ("Role", "ClusterRole",
                                                             "RoleBinding", "ClusterRoleBinding")]


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
