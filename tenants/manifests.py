"""The Kubernetes objects that make a tenant's namespace, as pure functions: spec in, dicts out.

No client, no database, no settings lookups inside: `NamespaceSpec` carries everything, so the
functions are tested by comparing dicts and validated against the Kubernetes schema.
"""

from __future__ import annotations

import dataclasses
import ipaddress
from typing import Any

from catalogue.sharing import DEVICE_CLASS_QUOTA_SUFFIX, device_class_quota
from kube.labels import (
    ANNOTATION_PROJECT_NAME,
    LABEL_EXPOSED,
    LABEL_ISOLATED,
    LABEL_PROJECT_ID,
    LABEL_PROJECT_NAME,
    LABEL_QUEUED,
    MANAGED_BY,
    label_value,
)

# what the authenticating proxy beside every exposed pod's application takes (access/
# proxy.py), counted in the tenant's limits: a small, fixed share, requests = limits, so the
# sidecar changes no pod's QoS class. It moves every byte the application serves (downloads,
# websockets), hence more than a token CPU.
PROXY_CPU_MILLIS, PROXY_MEMORY_MIB = 100, 64
EXPOSED_PORT_NAME = "http"  # the exposed pod's port: its proxy's (workloads/manifests.py)
METADATA_ADDRESS = "169.254.169.254/32"
# what "the internet" leaves out unless the operator lists the cluster's own ranges: the private,
# shared (carrier-grade NAT), link-local (the metadata address among them) and loopback ranges,
# where pod and service networks, nodes, their kubelets and the API server usually are
PRIVATE_RANGES = ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10",
                  "169.254.0.0/16", "127.0.0.0/8", "fc00::/7", "fe80::/10")
EGRESS_POLICY = "gpu-portal-egress"
ISOLATED_POLICY = "gpu-portal-isolated-groups"
# Pod Security admission levels, from the most permissive to the least
POD_SECURITY_LEVELS = ("privileged", "baseline", "restricted")
GPU_RESOURCE = "nvidia.com/gpu"

# kubectl with a Keystone token (docs/rbac.md): the portal's own ClusterRoles
# (deploy/base/tenant-roles.yaml), never `view`/`edit`/`admin`. Everyone with a role in the project
# (its project-id group) reads; the role groups k8s-keystone-auth's role mapping adds
# (deploy/keystone-auth/sync-config.yaml) get exec/port-forward (member) and pod deletion (manager,
# admin). A role group is the same in every project, so those ClusterRoles hold only verbs the
# API server admits (CONNECT, DELETE), and deploy/base/tenant-admission.yaml refuses them to a
# token of another project than the namespace's.
PROJECT_CLUSTER_ROLE = "gpu-portal-tenant-reader"
ROLE_CLUSTER_ROLES = {"member": "gpu-portal-tenant-member", "manager": "gpu-portal-tenant-manager",
                      "admin": "gpu-portal-tenant-manager"}

QUOTA_NAME = "gpu-portal-quota"
LIMIT_RANGE_NAME = "gpu-portal-defaults"
SERVICE_ACCOUNT_NAME = "workload"


def restricted_container_security(uid: int) -> dict[str, Any]:
    """The securityContext of a container the portal adds beside a workload's application (its
    proxy, the SSH server's installer): Pod Security "restricted" in every field, as `uid`, on a
    read-only root."""
    return {
        "runAsNonRoot": True,
        "runAsUser": uid,
        "runAsGroup": uid,
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
        "readOnlyRootFilesystem": True,
    }


def egress_destination(entry: str) -> tuple[str, int | None]:
    """An operator's egress entry, `CIDR` (every port) or `CIDR:PORT` (TCP and UDP on that
    port), as (the network, normalised; the port or None), or ValueError."""
    entry = entry.strip()
    network, port = entry, None
    if "/" in entry and ":" in entry.rpartition("/")[2]:
        network, _, port_text = entry.rpartition(":")
        if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
            raise ValueError(f"“{entry}”: the port after the CIDR must be 1-65535.")
        port = int(port_text)
    try:
        return str(ipaddress.ip_network(network, strict=True)), port
    except ValueError as exc:
        raise ValueError(f"“{entry}” is not CIDR or CIDR:PORT ({exc}).") from exc


@dataclasses.dataclass(frozen=True)
class EgressSpec:
    """Where a tenant's pods may open connections (answers to connections made to them are
    never blocked): cluster DNS, their own namespace, the portal's web pods (the proxies' token
    and key endpoints), the operator's destinations, and the internet if the site allows it,
    which is every address but `internet_except` and the metadata address."""

    dns_namespace: str = "kube-system"
    dns_pod_labels: tuple[tuple[str, str], ...] = (("k8s-app", "kube-dns"),)
    # the portal's web pods; no namespace: no rule (the proxies then reach the portal through
    # a destination below or the internet)
    portal_namespace: str = ""
    portal_pod_labels: tuple[tuple[str, str], ...] = ()
    portal_port: int | str = 8000  # the web container's port (a number or its name)
    destinations: tuple[tuple[str, int | None], ...] = ()  # (CIDR, port or None: every port)
    internet: bool = True
    internet_except: tuple[str, ...] = PRIVATE_RANGES


@dataclasses.dataclass(frozen=True)
class NamespaceSpec:
    namespace: str
    project_id: str
    project_name: str
    # quota
    gpus_total: int
    # extended resource → limit (MIG resources beside nvidia.com/gpu); a DRA type's device
    # class's quota key (device_class_quota) → the devices its claims may take
    gpus_by_resource: dict[str, int]
    cpu: int
    memory_gb: int
    max_workloads: int
    # volumes: GiB their claims ask for in all, and how many claims (the storage quota, and
    # room for the claims the portal makes beside them: provisioning's CLAIM_ALLOWANCES)
    storage_gib: int = 0
    volumes: int = 0
    # within a storage class, where the admin set it: (class, GiB or None, claims or None)
    storage_by_class: tuple[tuple[str, int | None, int | None], ...] = ()
    # policy
    pod_security: tuple[str, str, str] = ("restricted", "restricted", "restricted")
    project_group_format: str = "{project_id}"
    role_group_format: str = "gpu-portal:{role}"
    default_cpu: str = "1"
    default_memory: str = "4Gi"
    default_cpu_request: str = "500m"
    default_memory_request: str = "2Gi"
    # what each workload's sidecar (a service's authenticating proxy) holds beyond the
    # workload's own CPU and memory: the quota leaves room for one per workload, since the
    # portal admits workloads by their own requests
    sidecar_cpu_millis: int = 0
    sidecar_memory_mib: int = 0
    egress: EgressSpec = EgressSpec()
    # queueing on Kueue: its ClusterQueue is the quota of GPUs, CPU and memory (a tenant may
    # borrow past its own); the ResourceQuota keeps only the counts
    queued: bool = False


def enforced_level(site_level: str, *, allow_root: bool) -> str:
    """The Pod Security level a tenant's namespace enforces: the site's, lowered to "baseline"
    for a tenant an admin lets run templates that may run as root ("restricted" admits no
    container that may run as root; "baseline" admits root, still without privileged
    containers, host namespaces or host paths)."""
    return "baseline" if allow_root and site_level == "restricted" else site_level


def level_admits_root(level: str) -> bool:
    return level != "restricted"


def _labels(spec: NamespaceSpec) -> dict[str, str]:
    return {**MANAGED_BY, LABEL_PROJECT_ID: label_value(spec.project_id),
            LABEL_PROJECT_NAME: label_value(spec.project_name)}


def _meta(spec: NamespaceSpec, name: str) -> dict[str, Any]:
    return {"name": name, "namespace": spec.namespace, "labels": _labels(spec)}


def make_namespace(spec: NamespaceSpec) -> dict[str, Any]:
    enforce, warn, audit = spec.pod_security
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": spec.namespace,
            "labels": {
                **_labels(spec),
                # what tenant-admission.yaml's guard reads: GPU pods need the queue label
                LABEL_QUEUED: "true" if spec.queued else "false",
                "pod-security.kubernetes.io/enforce": enforce,
                "pod-security.kubernetes.io/enforce-version": "latest",
                "pod-security.kubernetes.io/warn": warn,
                "pod-security.kubernetes.io/warn-version": "latest",
                "pod-security.kubernetes.io/audit": audit,
                "pod-security.kubernetes.io/audit-version": "latest",
            },
            "annotations": {ANNOTATION_PROJECT_NAME: spec.project_name},
        },
    }


def _cpu(millis: int) -> str:
    """A CPU quantity as the API server writes it back (cores when whole, else millicores)."""
    return str(millis // 1000) if millis % 1000 == 0 else f"{millis}m"


def _memory(mib: int) -> str:
    """Memory as the API server writes it back (Gi when whole, else Mi)."""
    return f"{mib // 1024}Gi" if mib % 1024 == 0 else f"{mib}Mi"


def kueue_dra_resource(device_class: str) -> str:
    """The resource Kueue counts the devices of `device_class` under, in its ClusterQueues'
    quotas and its Workloads' requests: the name its Configuration's
    `resources.deviceClassMappings` gives the class (kueue_device_class_mappings). The
    ResourceQuota's own key, so that one name means the class's devices wherever the portal's
    quotas hold them."""
    return device_class_quota(device_class)


LABEL_GPU_TYPE = "gpu-portal.io/gpu-type"


@dataclasses.dataclass(frozen=True)
class DeviceClassSpec:
    """A DRA GPU type's own DeviceClass: `name` (dra_type_class), for the type `slug`, selecting
    by `selector` (CEL: the driver's class's terms and the type's product and memory)."""

    name: str
    slug: str
    selector: str


def make_device_class(spec: DeviceClassSpec) -> dict[str, Any]:
    """The DeviceClass a DRA type's claims name (cluster-wide, one per type): its devices are
    the driver's that the selector admits, and a claim of it asks nothing more."""
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": {"name": spec.name, "labels": {**MANAGED_BY, LABEL_GPU_TYPE: spec.slug}},
            "spec": {"selectors": [{"cel": {"expression": spec.selector}}]}}


def make_resource_quota(spec: NamespaceSpec) -> dict[str, Any]:
    cpu = _cpu(spec.cpu * 1000 + spec.max_workloads * spec.sidecar_cpu_millis)
    memory = _memory(spec.memory_gb * 1024 + spec.max_workloads * spec.sidecar_memory_mib)
    hard = {
        # a workload is a pod (plus a replaced pod during a restart) and at most one LB service
        "pods": str(spec.max_workloads * 2),
        "services.loadbalancers": str(spec.max_workloads),
        # the volumes' claims (storage/): counted by the portal when a volume is made or grown,
        # and by the API server for any claim made in the namespace by other means
        "requests.storage": f"{spec.storage_gib}Gi" if spec.storage_gib else "0",
        "persistentvolumeclaims": str(spec.volumes),
    }
    for storage_class, gib, claims in spec.storage_by_class:
        # the API server's own per-class keys: a claim of the class made by other means counts
        prefix = f"{storage_class}.storageclass.storage.k8s.io"
        if gib is not None:
            hard[f"{prefix}/requests.storage"] = f"{gib}Gi" if gib else "0"
        if claims is not None:
            hard[f"{prefix}/persistentvolumeclaims"] = str(claims)
    if not spec.queued:
        hard.update({
            f"requests.{GPU_RESOURCE}": str(spec.gpus_total),
            "requests.cpu": cpu,
            "limits.cpu": cpu,
            "requests.memory": memory,
            "limits.memory": memory,
        })
        for resource, limit in sorted(spec.gpus_by_resource.items()):
            if resource.endswith(DEVICE_CLASS_QUOTA_SUFFIX):
                # the devices a DRA type's claims may take, counted per device class by the
                # API server's own quota of ResourceClaims (no requests. prefix)
                hard[resource] = str(limit)
            elif resource != GPU_RESOURCE:
                hard[f"requests.{resource}"] = str(limit)
    return {"apiVersion": "v1", "kind": "ResourceQuota",
            "metadata": _meta(spec, QUOTA_NAME), "spec": {"hard": hard}}


def make_limit_range(spec: NamespaceSpec) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": _meta(spec, LIMIT_RANGE_NAME),
        "spec": {"limits": [{
            "type": "Container",
            "default": {"cpu": spec.default_cpu, "memory": spec.default_memory},
            "defaultRequest": {"cpu": spec.default_cpu_request,
                               "memory": spec.default_memory_request},
        }]},
    }


def _subnet_of(cidr: str, other: str) -> bool:
    """Whether the range `cidr` lies inside `other` (of either family; never across them)."""
    inner, outer = ipaddress.ip_network(cidr), ipaddress.ip_network(other)
    if isinstance(inner, ipaddress.IPv4Network) and isinstance(outer, ipaddress.IPv4Network):
        return inner.subnet_of(outer)
    if isinstance(inner, ipaddress.IPv6Network) and isinstance(outer, ipaddress.IPv6Network):
        return inner.subnet_of(outer)
    return False


def _internet(excluded: tuple[str, ...]) -> list[dict[str, Any]]:
    """Every address of each family but the excluded ranges (and the metadata address)."""
    blocks = []
    for everything in ("0.0.0.0/0", "::/0"):
        family = ipaddress.ip_network(everything).version
        left_out = sorted({str(ipaddress.ip_network(cidr)) for cidr in (*excluded,
                                                                          METADATA_ADDRESS)
                           if ipaddress.ip_network(cidr).version == family},
                          key=lambda cidr: ipaddress.ip_network(cidr))
        # a range inside another one that is left out adds nothing
        left_out = [cidr for cidr in left_out if not any(
            other != cidr and _subnet_of(cidr, other) for other in left_out)]
        blocks.append({"ipBlock": {"cidr": everything, "except": left_out}})
    return [{"to": blocks}]


def make_egress_rules(egress: EgressSpec) -> list[dict[str, Any]]:
    """What a tenant's pods may reach. Never the API server, nor a node's kubelet (10250):
    they are in the cluster's own ranges, which only the operator's destinations may open."""
    dns = {"namespaceSelector": {"matchLabels": {
               "kubernetes.io/metadata.name": egress.dns_namespace}},
           "podSelector": {"matchLabels": dict(egress.dns_pod_labels)}}
    rules: list[dict[str, Any]] = [
        {"to": [dns], "ports": [{"protocol": "UDP", "port": 53},
                                {"protocol": "TCP", "port": 53}]},
        {"to": [{"podSelector": {}}]},  # the namespace's own pods, on any port
    ]
    if egress.portal_namespace:
        rules.append({
            "to": [{"namespaceSelector": {"matchLabels": {
                        "kubernetes.io/metadata.name": egress.portal_namespace}},
                    "podSelector": {"matchLabels": dict(egress.portal_pod_labels)}}],
            "ports": [{"protocol": "TCP", "port": egress.portal_port}]})
    for cidr, port in egress.destinations:
        rule: dict[str, Any] = {"to": [{"ipBlock": {"cidr": cidr}}]}
        if port is not None:
            rule["ports"] = [{"protocol": "TCP", "port": port}, {"protocol": "UDP", "port": port}]
        rules.append(rule)
    if egress.internet:
        rules += _internet(egress.internet_except)
    return rules


def make_network_policies(spec: NamespaceSpec) -> list[dict[str, Any]]:
    """Isolation: only pods of the namespace may reach its pods; an exposed pod (a service
    workload's) is reached by anyone, the namespace's own pods included, only on its port
    "http", which is its authenticating proxy's: the application behind the proxy is reached
    by nothing but the proxy, over the pod's loopback. Out of the namespace, its pods reach
    only what `EgressSpec` names: never the cloud metadata address, the API server or the
    nodes' kubelets (unless the operator names their addresses).

    Policies add up: a pod selected by two policies admits what either admits. So the
    namespace-wide policy must leave the exposed pods out, or it would open every port of
    theirs to the namespace around the proxy; and the isolated ones (the pods of an MPIJob,
    whose workers run SSH servers), which nothing here admits: only their group's own policy
    does (workloads/manifests.py make_group_network_policy). A pod selected by no policy would
    admit everyone, so one selects them and admits nothing: an isolated pod whose group's
    policy is missing is closed, not open."""

    def policy(name: str, body: dict[str, Any]) -> dict[str, Any]:
        return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
                "metadata": _meta(spec, name), "spec": body}

    return [
        policy("gpu-portal-same-namespace", {
            # NotIn also matches pods without the label: every pod but the exposed ones
            "podSelector": {"matchExpressions": [
                {"key": LABEL_EXPOSED, "operator": "NotIn", "values": ["true"]},
                {"key": LABEL_ISOLATED, "operator": "NotIn", "values": ["true"]}]},
            "policyTypes": ["Ingress"],
            "ingress": [{"from": [{"podSelector": {}}]}],
        }),
        policy("gpu-portal-exposed-services", {
            "podSelector": {"matchLabels": {LABEL_EXPOSED: "true"}},
            "policyTypes": ["Ingress"],
            "ingress": [{"ports": [{"protocol": "TCP", "port": EXPOSED_PORT_NAME}]}],
        }),
        policy(ISOLATED_POLICY, {
            "podSelector": {"matchLabels": {LABEL_ISOLATED: "true"}},
            "policyTypes": ["Ingress"],
        }),
        policy(EGRESS_POLICY, {
            "podSelector": {},
            "policyTypes": ["Egress"],
            "egress": make_egress_rules(spec.egress),
        }),
    ]


# Objects the portal made in earlier versions and no longer wants: provisioning deletes them.
# The egress policy that admitted everything but the metadata address would, policies adding
# up, keep admitting it all beside the new one.
# The RoleBinding of the role group `reader` went with the portal's own ClusterRoles: every
# reader is in the project-id group.
RETIRED_OBJECTS = (("NetworkPolicy", "gpu-portal-deny-metadata"),
                   ("RoleBinding", "gpu-portal-keystone-reader"))


def make_service_account(spec: NamespaceSpec) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": _meta(spec, SERVICE_ACCOUNT_NAME),
            "automountServiceAccountToken": False}


def _group(fmt: str, spec: NamespaceSpec, role: str = "") -> dict[str, str]:
    name = fmt.format(project_id=spec.project_id, project_name=spec.project_name, role=role)
    return {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": name}


def make_role_bindings(spec: NamespaceSpec) -> list[dict[str, Any]]:
    """Keystone roles → the portal's ClusterRoles, for the groups k8s-keystone-auth reports.

    A token carries its project's id as a group: that group reads (PROJECT_CLUSTER_ROLE). The
    role groups its role mapping adds get what their role allows (ROLE_CLUSTER_ROLES); they
    name no project, so the admission fence (deploy/base/tenant-admission.yaml) keeps them to
    the token's own project. Names avoid k8s-keystone-auth's own `<userID>_<role>` pattern.
    """

    def binding(name: str, cluster_role: str, subject: dict[str, str]) -> dict[str, Any]:
        return {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": _meta(spec, name),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": cluster_role},
            "subjects": [subject],
        }

    bindings = [binding("gpu-portal-project-members", PROJECT_CLUSTER_ROLE,
                        _group(spec.project_group_format, spec))]
    for role, cluster_role in ROLE_CLUSTER_ROLES.items():
        bindings.append(binding(f"gpu-portal-keystone-{role}", cluster_role,
                                _group(spec.role_group_format, spec, role)))
    return bindings


def tenant_objects(spec: NamespaceSpec) -> list[dict[str, Any]]:
    """Everything a tenant's namespace holds, namespace first."""
    return [
        make_namespace(spec),
        make_resource_quota(spec),
        make_limit_range(spec),
        *make_network_policies(spec),
        make_service_account(spec),
        *make_role_bindings(spec),
    ]
