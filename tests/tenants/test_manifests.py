"""The namespace objects as pure functions: exact dicts, and valid against the Kubernetes schema."""

import dataclasses
import ipaddress

import kubernetes_validate
import pytest

from catalogue.sharing import device_class_quota
from kube.labels import label_value
from kubesim.selectors import selector_from_match  # kubesim's Kubernetes label selectors
from tenants.manifests import (
    RETIRED_OBJECTS,
    EgressSpec,
    NamespaceSpec,
    egress_destination,
    enforced_level,
    level_admits_root,
    make_egress_rules,
    make_resource_quota,
    tenant_objects,
)

SPEC = NamespaceSpec(namespace="gpu-vision-lab-abc123", project_id="d964ebf8619749c3",
                     project_name="Vision Lab", gpus_total=8,
                     gpus_by_resource={"nvidia.com/gpu": 8, "nvidia.com/mig-1g.10gb": 7},
                     cpu=64, memory_gb=512, max_workloads=10)


def test_every_object_is_valid_against_the_kubernetes_schema():
    version = kubernetes_validate.utils.latest_version()
    objects = tenant_objects(SPEC)
    assert objects
    for obj in objects:  # raises ValidationError naming the field
        kubernetes_validate.validate(obj, version, strict=True)


def test_the_set_of_objects():
    kinds = [(o["kind"], o["metadata"]["name"]) for o in tenant_objects(SPEC)]
    assert kinds == [
        ("Namespace", "gpu-vision-lab-abc123"),
        ("ResourceQuota", "gpu-portal-quota"),
        ("LimitRange", "gpu-portal-defaults"),
        ("NetworkPolicy", "gpu-portal-same-namespace"),
        ("NetworkPolicy", "gpu-portal-exposed-services"),
        ("NetworkPolicy", "gpu-portal-isolated-groups"),
        ("NetworkPolicy", "gpu-portal-egress"),
        ("ServiceAccount", "workload"),
        ("RoleBinding", "gpu-portal-project-members"),
        ("RoleBinding", "gpu-portal-keystone-member"),
        ("RoleBinding", "gpu-portal-keystone-manager"),
        ("RoleBinding", "gpu-portal-keystone-admin"),
    ]
    for obj in tenant_objects(SPEC):
        assert obj["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "gpu-portal"
        assert obj["metadata"]["labels"]["gpu-portal.io/project-id"] == "d964ebf8619749c3"


def test_resource_quota_counts_gpus_mig_cpu_memory_pods_and_load_balancers():
    spec = dataclasses.replace(SPEC, storage_gib=500, volumes=12)
    assert make_resource_quota(spec)["spec"]["hard"] == {
        "requests.nvidia.com/gpu": "8",
        "requests.nvidia.com/mig-1g.10gb": "7",
        "requests.cpu": "64", "limits.cpu": "64",
        "requests.memory": "512Gi", "limits.memory": "512Gi",
        "pods": "20", "services.loadbalancers": "10",
        "requests.storage": "500Gi", "persistentvolumeclaims": "12",
    }
    # none allowed, in the API server's own spelling (else every reconcile sees drift)
    assert make_resource_quota(SPEC)["spec"]["hard"]["requests.storage"] == "0"


def test_resource_quota_counts_a_dra_types_devices_per_device_class():
    spec = dataclasses.replace(SPEC, gpus_by_resource={
        "nvidia.com/gpu": 8, device_class_quota("a100-dra.gpu-portal.io"): 3,
        device_class_quota("h100-dra.gpu-portal.io"): 1})
    hard = make_resource_quota(spec)["spec"]["hard"]
    assert hard["a100-dra.gpu-portal.io.deviceclass.resource.k8s.io/devices"] == "3"
    assert hard["h100-dra.gpu-portal.io.deviceclass.resource.k8s.io/devices"] == "1"
    assert not any("deviceclass" in key for key in hard if key.startswith("requests."))
    kubernetes_validate.validate(make_resource_quota(spec),
                                 kubernetes_validate.utils.latest_version(), strict=True)


def test_resource_quota_carries_a_storage_class_s_keys_where_the_quota_sets_them():
    spec = dataclasses.replace(SPEC, storage_gib=500, volumes=12, storage_by_class=(
        ("fast-ssd", 200, 5), ("lustre", 2000, None), ("scratch", None, 1), ("tape", 0, 0)))
    hard = make_resource_quota(spec)["spec"]["hard"]
    per_class = {key: value for key, value in hard.items() if ".storageclass." in key}
    assert per_class == {
        "fast-ssd.storageclass.storage.k8s.io/requests.storage": "200Gi",
        "fast-ssd.storageclass.storage.k8s.io/persistentvolumeclaims": "5",
        "lustre.storageclass.storage.k8s.io/requests.storage": "2000Gi",
        "scratch.storageclass.storage.k8s.io/persistentvolumeclaims": "1",
        "tape.storageclass.storage.k8s.io/requests.storage": "0",
        "tape.storageclass.storage.k8s.io/persistentvolumeclaims": "0",
    }
    assert (hard["requests.storage"], hard["persistentvolumeclaims"]) == ("500Gi", "12")


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
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    assert labels["pod-security.kubernetes.io/warn"] == "restricted"
    assert labels["pod-security.kubernetes.io/audit"] == "restricted"
    assert labels["gpu-portal.io/project-name"] == "Vision-Lab"
    assert ns["metadata"]["annotations"]["gpu-portal.io/project-display-name"] == "Vision Lab"


def test_network_policies_isolate_and_limit_egress():
    policies = {o["metadata"]["name"]: o["spec"] for o in tenant_objects(SPEC)
                if o["kind"] == "NetworkPolicy"}
    assert policies == {
        # the namespace's pods reach one another, except the exposed ones: policies add up, so
        # selecting those here would open every port of theirs around the proxy; and the
        # isolated ones (an MPIJob's), reached only by their own group
        "gpu-portal-same-namespace": {
            "podSelector": {"matchExpressions": [
                {"key": "gpu-portal.io/exposed", "operator": "NotIn", "values": ["true"]},
                {"key": "gpu-portal.io/isolated", "operator": "NotIn", "values": ["true"]}]},
            "policyTypes": ["Ingress"],
            "ingress": [{"from": [{"podSelector": {}}]}],
        },
        # an exposed pod: anyone, the namespace's own pods too, only on port "http" (its proxy)
        "gpu-portal-exposed-services": {
            "podSelector": {"matchLabels": {"gpu-portal.io/exposed": "true"}},
            "policyTypes": ["Ingress"],
            "ingress": [{"ports": [{"protocol": "TCP", "port": "http"}]}],
        },
        # an isolated pod: nothing (its group's own policy admits its group's pods); selected
        # here so that one whose group's policy is missing is closed, not open to all
        "gpu-portal-isolated-groups": {
            "podSelector": {"matchLabels": {"gpu-portal.io/isolated": "true"}},
            "policyTypes": ["Ingress"],
        },
        # out of the namespace: DNS, its own pods, and the internet without the cluster's
        # private ranges (the metadata address is in the link-local one)
        "gpu-portal-egress": {
            "podSelector": {},
            "policyTypes": ["Egress"],
            "egress": [
                {"to": [{"namespaceSelector": {"matchLabels": {
                             "kubernetes.io/metadata.name": "kube-system"}},
                         "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}],
                 "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]},
                {"to": [{"podSelector": {}}]},
                {"to": [
                    {"ipBlock": {"cidr": "0.0.0.0/0", "except": [
                        "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
                        "172.16.0.0/12", "192.168.0.0/16"]}},
                    {"ipBlock": {"cidr": "::/0", "except": ["fc00::/7", "fe80::/10"]}}]},
            ],
        },
    }


SITE_EGRESS = EgressSpec(
    portal_namespace="gpu-portal",
    portal_pod_labels=(("app.kubernetes.io/component", "web"),
                       ("app.kubernetes.io/name", "gpu-portal")),
    destinations=(("10.20.0.0/24", None), ("10.30.0.5/32", 5000)),
    internet=False)


def test_the_sites_egress_names_the_portal_and_its_destinations():
    egress = make_egress_rules(SITE_EGRESS)
    assert egress[2:] == [
        # the proxies' token and key endpoints: the portal's web pods, on their port only
        {"to": [{"namespaceSelector": {"matchLabels": {
                     "kubernetes.io/metadata.name": "gpu-portal"}},
                 "podSelector": {"matchLabels": {"app.kubernetes.io/component": "web",
                                                 "app.kubernetes.io/name": "gpu-portal"}}}],
         "ports": [{"protocol": "TCP", "port": 8000}]},
        {"to": [{"ipBlock": {"cidr": "10.20.0.0/24"}}]},
        {"to": [{"ipBlock": {"cidr": "10.30.0.5/32"}}],
         "ports": [{"protocol": "TCP", "port": 5000}, {"protocol": "UDP", "port": 5000}]},
    ]  # and no internet
    spec = dataclasses.replace(SPEC, egress=SITE_EGRESS)
    version = kubernetes_validate.utils.latest_version()
    for obj in tenant_objects(spec):
        kubernetes_validate.validate(obj, version, strict=True)


def reachable(egress: EgressSpec, address: str, port: int) -> bool:
    """Whether the egress rules admit TCP to `address`:`port` outside the namespace and not
    to a pod the rules select (an address of a node, a Service, the API server …)."""
    ip = ipaddress.ip_address(address)
    for rule in make_egress_rules(egress):
        ports = [p["port"] for p in rule.get("ports", []) if p["protocol"] == "TCP"]
        if "ports" in rule and port not in ports:
            continue
        for peer in rule["to"]:
            block = peer.get("ipBlock")
            if block and ip in ipaddress.ip_network(block["cidr"]) and not any(
                    ip in ipaddress.ip_network(cidr) for cidr in block.get("except", [])):
                return True
    return False


@pytest.mark.parametrize("egress", [EgressSpec(), SITE_EGRESS], ids=["default", "site"])
@pytest.mark.parametrize(("address", "port"), [
    ("10.96.0.1", 443),  # the API server's Service
    ("192.168.10.2", 6443),  # the API server itself
    ("10.0.0.5", 10250), ("172.16.4.4", 10250),  # kubelets
    ("169.254.169.254", 80),  # the cloud's metadata
    ("100.64.3.7", 8888),  # another tenant's pod (a shared-range pod network)
])
def test_never_the_api_server_the_kubelets_nor_the_metadata_address(egress, address, port):
    assert not reachable(egress, address, port)


def test_the_internet_only_where_the_site_allows_it():
    assert reachable(EgressSpec(), "151.101.0.223", 443)  # pypi.org
    assert reachable(EgressSpec(), "2a04:4e42::223", 443)
    assert not reachable(SITE_EGRESS, "151.101.0.223", 443)
    # the operator's destinations: a registry mirror on one port, a subnet on all
    assert reachable(SITE_EGRESS, "10.30.0.5", 5000)
    assert not reachable(SITE_EGRESS, "10.30.0.5", 10250)
    assert reachable(SITE_EGRESS, "10.20.0.9", 3128)
    # the metadata address stays out even when the operator's list forgets link-local
    assert not reachable(EgressSpec(internet_except=("10.0.0.0/8",)), "169.254.169.254", 80)


@pytest.mark.parametrize(("entry", "parsed"), [
    ("10.20.0.0/24", ("10.20.0.0/24", None)),
    (" 10.30.0.5/32:5000 ", ("10.30.0.5/32", 5000)),
    ("fd00:1::/64", ("fd00:1::/64", None)),
    ("fd00:1::/64:443", ("fd00:1::/64", 443)),
])
def test_egress_destinations(entry, parsed):
    assert egress_destination(entry) == parsed


@pytest.mark.parametrize("entry", ["10.20.0.1/24", "10.20.0.0/24:0", "10.20.0.0/24:http",
                                   "registry.example.org", "10.20.0.0/33"])
def test_bad_egress_destinations_are_refused(entry):
    with pytest.raises(ValueError):
        egress_destination(entry)


@pytest.mark.parametrize(("pod_labels", "admitted"), [
    # a batch pod (no label): the namespace's pods, on any port
    ({}, [("same-namespace pod", "any port")]),
    ({"gpu-portal.io/exposed": "false"}, [("same-namespace pod", "any port")]),
    # an exposed pod: anyone, only on "http", and nothing else; not even the namespace's pods
    # reach the application's own port
    ({"gpu-portal.io/exposed": "true"}, [("anyone", "http")]),
    # a pod of an MPIJob: nothing the tenant's policies admit (its group's own policy does)
    ({"gpu-portal.io/isolated": "true"}, []),
    ({"gpu-portal.io/isolated": "false"}, [("same-namespace pod", "any port")]),
])
def test_only_the_proxy_port_of_an_exposed_pod_is_reachable(pod_labels, admitted):
    got = []
    for policy in tenant_objects(SPEC):
        if policy["kind"] != "NetworkPolicy" or "Ingress" not in policy["spec"]["policyTypes"]:
            continue
        if not selector_from_match(policy["spec"]["podSelector"]).matches(pod_labels):
            continue
        for rule in policy["spec"].get("ingress", []):
            source = "same-namespace pod" if rule.get("from") == [{"podSelector": {}}] else \
                "anyone" if "from" not in rule else rule["from"]
            ports = [p["port"] for p in rule.get("ports", [])] or ["any port"]
            got += [(source, port) for port in ports]
    assert got == admitted


def test_role_bindings_map_keystone_roles_to_the_portals_own_cluster_roles():
    """The project-id group reads; the role groups of k8s-keystone-auth's role mapping
    (`gpu-portal:<role>`, deploy/keystone-auth/sync-config.yaml) get the portal's member and
    manager roles. Never `view` (it reads what the portal hides, nothing less), `edit` or
    `admin` (they create pods, Services and NetworkPolicies past the portal)."""
    bindings = {o["metadata"]["name"]: o for o in tenant_objects(SPEC) if o["kind"] == "RoleBinding"}
    mapping = {name: (b["roleRef"]["name"], b["subjects"][0]["name"]) for name, b in bindings.items()}
    assert mapping == {
        "gpu-portal-project-members": ("gpu-portal-tenant-reader", "d964ebf8619749c3"),
        "gpu-portal-keystone-member": ("gpu-portal-tenant-member", "gpu-portal:member"),
        "gpu-portal-keystone-manager": ("gpu-portal-tenant-manager", "gpu-portal:manager"),
        "gpu-portal-keystone-admin": ("gpu-portal-tenant-manager", "gpu-portal:admin"),
    }
    for b in bindings.values():
        assert not b["metadata"]["name"].startswith(SPEC.project_id)  # not k8s-keystone-auth's
    # the binding of the role group `reader` is gone from namespaces made before
    assert ("RoleBinding", "gpu-portal-keystone-reader") in RETIRED_OBJECTS


def test_the_group_format_is_configurable():
    spec = dataclasses.replace(SPEC, role_group_format="keystone:{project_name}:{role}")
    subjects = [o["subjects"][0]["name"] for o in tenant_objects(spec) if o["kind"] == "RoleBinding"]
    assert "keystone:Vision Lab:member" in subjects


@pytest.mark.parametrize(("queued", "label"), [(True, "true"), (False, "false")])
def test_the_namespace_says_whether_gpu_pods_queue(queued, label):
    """tenant-admission.yaml's guard reads it: in a queued namespace a GPU pod needs the queue
    label. Always set, so that a reconcile's label patch turns it off again."""
    namespace = tenant_objects(dataclasses.replace(SPEC, queued=queued))[0]
    assert namespace["metadata"]["labels"]["gpu-portal.io/queued"] == label


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


def test_bad_egress_settings_stop_the_start(settings):
    from tenants.checks import workload_egress_check

    assert workload_egress_check(None) == []  # the defaults
    settings.PORTAL_WORKLOAD_EGRESS_CIDRS = ["10.30.0.5/32:5000", "registry.example.org"]
    settings.PORTAL_WORKLOAD_EGRESS_INTERNET_EXCEPT = ["10.0.0.0/8", "0.0.0.0/0"]
    settings.PORTAL_WORKLOAD_EGRESS_PORTAL_PORT = "HTTP!"
    messages = [error.msg for error in workload_egress_check(None)]
    assert [message.split(":")[0] for message in messages] == [
        "PORTAL_WORKLOAD_EGRESS_CIDRS", "PORTAL_WORKLOAD_EGRESS_INTERNET_EXCEPT",
        "PORTAL_WORKLOAD_EGRESS_PORTAL_PORT"]


@pytest.mark.parametrize(("site", "allow_root", "enforced", "root"), [
    ("restricted", False, "restricted", False),
    ("restricted", True, "baseline", True),  # an admin let the tenant run root templates
    ("baseline", False, "baseline", True),  # the site's level admits root everywhere
    ("privileged", True, "privileged", True),
])
def test_a_tenant_allowed_root_templates_enforces_baseline(site, allow_root, enforced, root):
    assert enforced_level(site, allow_root=allow_root) == enforced
    assert level_admits_root(enforced) is root


def test_an_unknown_pod_security_level_stops_the_start(settings):
    from tenants.checks import pod_security_check

    assert pod_security_check(None) == []
    settings.PORTAL_POD_SECURITY_ENFORCE = "strict"
    (error,) = pod_security_check(None)
    assert error.id == "tenants.E003" and "PORTAL_POD_SECURITY_ENFORCE" in error.msg


def test_a_dra_types_own_device_class_narrows_the_drivers_to_its_board():
    from catalogue.sharing import dra_type_class, dra_type_class_selector
    from tenants.manifests import DeviceClassSpec, make_device_class

    selector = dra_type_class_selector(device_class="gpu.nvidia.com",
                                       product="NVIDIA H100 80GB HBM3", memory_gb=80)
    assert selector == (
        "device.driver == 'gpu.nvidia.com' && "
        "device.attributes['gpu.nvidia.com'].type == 'gpu' && "
        "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3' && "
        "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('80G')) >= 0")
    klass = make_device_class(DeviceClassSpec(name=dra_type_class("h100-dra"), slug="h100-dra",
                                              selector=selector))
    assert klass == {
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
        "metadata": {"name": "h100-dra.gpu-portal.io", "labels": {
            "app.kubernetes.io/managed-by": "gpu-portal", "gpu-portal.io/gpu-type": "h100-dra"}},
        "spec": {"selectors": [{"cel": {"expression": selector}}]}}
    kubernetes_validate.validate(klass, kubernetes_validate.utils.latest_version(), strict=True)
