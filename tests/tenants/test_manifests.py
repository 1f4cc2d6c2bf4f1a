"""The namespace objects as pure functions: exact dicts, and valid against the Kubernetes schema."""

import dataclasses

import kubernetes_validate
import pytest

from kubesim.selectors import selector_from_match  # kubesim's Kubernetes label selectors
from tenants.manifests import NamespaceSpec, label_value, make_resource_quota, tenant_objects

SPEC = NamespaceSpec(namespace="gpu-vision-lab-abc123", project_id="d964ebf8619749c3",
                     project_name="Vision Lab", gpus_total=8,
                     gpus_by_resource={"nvidia.com/gpu": 8, "nvidia.com/mig-1g.10gb": 7},
                     cpu=64, memory_gb=512, max_workloads=10)


def test_every_object_is_valid_against_the_kubernetes_schema():
    version = kubernetes_validate.utils.latest_version()
    for obj in tenant_objects(SPEC):
        kubernetes_validate.validate(obj, version, strict=True)


def test_the_set_of_objects():
    kinds = [(o["kind"], o["metadata"]["name"]) for o in tenant_objects(SPEC)]
    assert kinds == [
        ("Namespace", "gpu-vision-lab-abc123"),
        ("ResourceQuota", "gpu-portal-quota"),
        ("LimitRange", "gpu-portal-defaults"),
        ("NetworkPolicy", "gpu-portal-same-namespace"),
        ("NetworkPolicy", "gpu-portal-exposed-services"),
        ("NetworkPolicy", "gpu-portal-deny-metadata"),
        ("ServiceAccount", "workload"),
        ("RoleBinding", "gpu-portal-project-members"),
        ("RoleBinding", "gpu-portal-keystone-reader"),
        ("RoleBinding", "gpu-portal-keystone-member"),
        ("RoleBinding", "gpu-portal-keystone-manager"),
        ("RoleBinding", "gpu-portal-keystone-admin"),
    ]
    for obj in tenant_objects(SPEC):
        assert obj["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "gpu-portal"
        assert obj["metadata"]["labels"]["gpu-portal.io/project-id"] == "d964ebf8619749c3"


def test_resource_quota_counts_gpus_mig_cpu_memory_pods_and_load_balancers():
    assert make_resource_quota(SPEC)["spec"]["hard"] == {
        "requests.nvidia.com/gpu": "8",
        "requests.nvidia.com/mig-1g.10gb": "7",
        "requests.cpu": "64", "limits.cpu": "64",
        "requests.memory": "512Gi", "limits.memory": "512Gi",
        "pods": "20", "services.loadbalancers": "10",
    }


def test_the_quota_leaves_room_for_each_workloads_proxy_in_the_api_servers_spelling():
    """The portal admits a workload by its own CPU and memory; its authenticating proxy holds
    more, so the namespace quota adds one proxy's worth per workload allowed. Quantities are
    written as the API server writes them back, or provisioning would see drift forever."""
    with_proxies = dataclasses.replace(SPEC, sidecar_cpu_millis=100, sidecar_memory_mib=64)
    hard = make_resource_quota(with_proxies)["spec"]["hard"]
    assert (hard["requests.cpu"], hard["limits.cpu"]) == ("65", "65")  # 64 + 10 × 100m
    assert hard["requests.memory"] == hard["limits.memory"] == "524928Mi"  # 512Gi + 640Mi
    three = make_resource_quota(dataclasses.replace(with_proxies, max_workloads=3,
                                                    memory_gb=1))["spec"]["hard"]
    assert three["limits.cpu"] == "64300m" and three["limits.memory"] == "1216Mi"
    sixteen = make_resource_quota(dataclasses.replace(with_proxies, max_workloads=16))
    assert sixteen["spec"]["hard"]["limits.memory"] == "513Gi"


def test_namespace_carries_pod_security_and_tenant_labels():
    ns = tenant_objects(SPEC)[0]
    labels = ns["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "baseline"
    assert labels["pod-security.kubernetes.io/warn"] == "restricted"
    assert labels["pod-security.kubernetes.io/audit"] == "restricted"
    assert labels["gpu-portal.io/project-name"] == "Vision-Lab"
    assert ns["metadata"]["annotations"]["gpu-portal.io/project-display-name"] == "Vision Lab"


def test_network_policies_isolate_and_block_the_metadata_address():
    policies = {o["metadata"]["name"]: o["spec"] for o in tenant_objects(SPEC)
                if o["kind"] == "NetworkPolicy"}
    assert policies == {
        # the namespace's pods reach one another, except the exposed ones: policies add up, so
        # selecting those here would open every port of theirs around the proxy
        "gpu-portal-same-namespace": {
            "podSelector": {"matchExpressions": [
                {"key": "gpu-portal.io/exposed", "operator": "NotIn", "values": ["true"]}]},
            "policyTypes": ["Ingress"],
            "ingress": [{"from": [{"podSelector": {}}]}],
        },
        # an exposed pod: anyone, the namespace's own pods too, only on port "http" (its proxy)
        "gpu-portal-exposed-services": {
            "podSelector": {"matchLabels": {"gpu-portal.io/exposed": "true"}},
            "policyTypes": ["Ingress"],
            "ingress": [{"ports": [{"protocol": "TCP", "port": "http"}]}],
        },
        "gpu-portal-deny-metadata": {
            "podSelector": {},
            "policyTypes": ["Egress"],
            "egress": [{"to": [{"ipBlock": {"cidr": "0.0.0.0/0",
                                            "except": ["169.254.169.254/32"]}}]}],
        },
    }


@pytest.mark.parametrize(("pod_labels", "admitted"), [
    # a batch pod (no label): the namespace's pods, on any port
    ({}, [("same-namespace pod", "any port")]),
    ({"gpu-portal.io/exposed": "false"}, [("same-namespace pod", "any port")]),
    # an exposed pod: anyone, only on "http", and nothing else; not even the namespace's pods
    # reach the application's own port
    ({"gpu-portal.io/exposed": "true"}, [("anyone", "http")]),
])
def test_only_the_proxy_port_of_an_exposed_pod_is_reachable(pod_labels, admitted):
    got = []
    for policy in tenant_objects(SPEC):
        if policy["kind"] != "NetworkPolicy" or "Ingress" not in policy["spec"]["policyTypes"]:
            continue
        if not selector_from_match(policy["spec"]["podSelector"]).matches(pod_labels):
            continue
        for rule in policy["spec"]["ingress"]:
            source = "same-namespace pod" if rule.get("from") == [{"podSelector": {}}] else \
                "anyone" if "from" not in rule else rule["from"]
            ports = [p["port"] for p in rule.get("ports", [])] or ["any port"]
            got += [(source, port) for port in ports]
    assert got == admitted


def test_role_bindings_map_keystone_roles_to_cluster_roles():
    bindings = {o["metadata"]["name"]: o for o in tenant_objects(SPEC) if o["kind"] == "RoleBinding"}
    mapping = {name: (b["roleRef"]["name"], b["subjects"][0]["name"]) for name, b in bindings.items()}
    assert mapping == {
        "gpu-portal-project-members": ("view", "d964ebf8619749c3"),
        "gpu-portal-keystone-reader": ("view", "d964ebf8619749c3:reader"),
        "gpu-portal-keystone-member": ("edit", "d964ebf8619749c3:member"),
        "gpu-portal-keystone-manager": ("edit", "d964ebf8619749c3:manager"),
        "gpu-portal-keystone-admin": ("admin", "d964ebf8619749c3:admin"),
    }
    for b in bindings.values():
        assert not b["metadata"]["name"].startswith(SPEC.project_id)  # not k8s-keystone-auth's


def test_the_group_format_is_configurable():
    import dataclasses

    spec = dataclasses.replace(SPEC, role_group_format="keystone:{project_name}:{role}")
    subjects = [o["subjects"][0]["name"] for o in tenant_objects(spec) if o["kind"] == "RoleBinding"]
    assert "keystone:Vision Lab:member" in subjects


def test_service_account_has_no_token_automount():
    sa = next(o for o in tenant_objects(SPEC) if o["kind"] == "ServiceAccount")
    assert sa["automountServiceAccountToken"] is False


@pytest.mark.parametrize(("text", "value"), [("Vision Lab", "Vision-Lab"), ("-x-", "x"),
                                             ("a" * 80, "a" * 63), ("视觉", "")])
def test_label_values(text, value):
    assert label_value(text) == value


def test_the_schema_check_catches_a_misspelt_field():
    """The validation above can fail: a misspelt field is refused by the strict schema."""
    quota = make_resource_quota(SPEC)
    quota["spec"]["hrad"] = quota["spec"].pop("hard")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(quota, kubernetes_validate.utils.latest_version(), strict=True)
