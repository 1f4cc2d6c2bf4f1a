"""The resource types kubesim serves: the registry behind discovery, routing and the store."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# an object as kubesim keeps and serves it: a plain dict in the Kubernetes JSON shape (camelCase)
Obj = dict[str, Any]

ALL_VERBS: tuple[str, ...] = (
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
)
READ_VERBS: tuple[str, ...] = ("get", "list", "watch")


@dataclass(frozen=True)
class ResourceType:
    group: str  # "" = core
    version: str
    kind: str  # "Pod"
    plural: str  # "pods"
    singular: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()  # "status", "log", ...
    verbs: tuple[str, ...] = ALL_VERBS
    categories: tuple[str, ...] = ()  # "all" makes `kubectl get all` include it

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def qualified(self) -> str:
        """What messages name: `pods`, `deployments.apps`."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.group, self.version, self.plural)

    @property
    def path_prefix(self) -> str:
        """`/api/v1` or `/apis/apps/v1`."""
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"


def _rt(
    group: str,
    kind: str,
    plural: str,
    *,
    namespaced: bool = True,
    short: tuple[str, ...] = (),
    sub: tuple[str, ...] = (),
    verbs: tuple[str, ...] = ALL_VERBS,
    version: str = "v1",
    categories: tuple[str, ...] = (),
) -> ResourceType:
    return ResourceType(
        group=group,
        version=version,
        kind=kind,
        plural=plural,
        singular=kind.lower(),
        namespaced=namespaced,
        short_names=short,
        subresources=sub,
        verbs=verbs,
        categories=categories,
    )


_NAMESPACE_VERBS = ("create", "delete", "get", "list", "patch", "update", "watch")

_TYPES: tuple[ResourceType, ...] = (
    _rt(
        "",
        "Namespace",
        "namespaces",
        namespaced=False,
        short=("ns",),
        sub=("status", "finalize"),
        verbs=_NAMESPACE_VERBS,
    ),
    _rt("", "Node", "nodes", namespaced=False, short=("no",), sub=("status",)),
    _rt("", "Pod", "pods", short=("po",), sub=("status", "log"), categories=("all",)),
    _rt(
        "",
        "Service",
        "services",
        short=("svc",),
        sub=("status",),
        categories=("all",),
        verbs=("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"),
    ),
    _rt("", "Endpoints", "endpoints", short=("ep",)),
    _rt("", "Secret", "secrets"),
    _rt("", "ConfigMap", "configmaps", short=("cm",)),
    _rt("", "PersistentVolumeClaim", "persistentvolumeclaims", short=("pvc",), sub=("status",)),
    # bound to claims by the dynamic provisioner's stand-in (controllers/volumes.py)
    _rt("", "PersistentVolume", "persistentvolumes", namespaced=False, short=("pv",),
        sub=("status",)),
    _rt("", "Event", "events", short=("ev",)),
    _rt("", "ServiceAccount", "serviceaccounts", short=("sa",)),
    _rt("", "ResourceQuota", "resourcequotas", short=("quota",), sub=("status",)),
    _rt("", "LimitRange", "limitranges", short=("limits",)),
    _rt(
        "apps", "Deployment", "deployments", short=("deploy",), sub=("status", "scale"),
        categories=("all",),
    ),
    _rt("apps", "ReplicaSet", "replicasets", short=("rs",), sub=("status", "scale"),
        categories=("all",)),
    # stored and served (so `kubectl apply` of a whole site works); no controller runs them
    _rt("apps", "StatefulSet", "statefulsets", short=("sts",), sub=("status", "scale"),
        categories=("all",)),
    _rt("apps", "DaemonSet", "daemonsets", short=("ds",), sub=("status",), categories=("all",)),
    _rt("batch", "Job", "jobs", sub=("status",), categories=("all",)),
    _rt(
        "autoscaling",
        "HorizontalPodAutoscaler",
        "horizontalpodautoscalers",
        short=("hpa",),
        sub=("status",),
        version="v2",
        categories=("all",),
    ),
    _rt("policy", "PodDisruptionBudget", "poddisruptionbudgets", short=("pdb",), sub=("status",)),
    _rt("networking.k8s.io", "NetworkPolicy", "networkpolicies", short=("netpol",)),
    _rt("networking.k8s.io", "Ingress", "ingresses", short=("ing",), sub=("status",)),
    _rt("node.k8s.io", "RuntimeClass", "runtimeclasses", namespaced=False),
    _rt("storage.k8s.io", "StorageClass", "storageclasses", namespaced=False, short=("sc",)),
    # MetalLB's address pools: the load balancer's (controllers/loadbalancer.py) published with
    # their counts in status, as MetalLB's controller writes them
    _rt("metallb.io", "IPAddressPool", "ipaddresspools", sub=("status",), version="v1beta1"),
    _rt("rbac.authorization.k8s.io", "Role", "roles"),
    _rt("rbac.authorization.k8s.io", "RoleBinding", "rolebindings"),
    _rt("rbac.authorization.k8s.io", "ClusterRole", "clusterroles", namespaced=False),
    _rt("rbac.authorization.k8s.io", "ClusterRoleBinding", "clusterrolebindings", namespaced=False),
    # stored and served (deploy/base/tenant-admission.yaml applies); kubesim does not enforce them
    _rt("admissionregistration.k8s.io", "ValidatingAdmissionPolicy", "validatingadmissionpolicies",
        namespaced=False, sub=("status",)),
    _rt("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding",
        "validatingadmissionpolicybindings", namespaced=False),
)

REGISTRY: dict[tuple[str, str, str], ResourceType] = {rt.key: rt for rt in _TYPES}

_BY_KIND: dict[str, ResourceType] = {rt.kind: rt for rt in _TYPES}


def by_kind(kind: str) -> ResourceType:
    """The resource type of a Kind ("Pod", "Deployment"); KeyError if not served."""
    return _BY_KIND[kind]


def lookup(group: str, version: str, plural: str) -> ResourceType | None:
    return REGISTRY.get((group, version, plural))


def group_versions() -> dict[str, list[str]]:
    """Served API groups (core = "") and their versions, in registry order."""
    groups: dict[str, list[str]] = {}
    for rt in _TYPES:
        versions = groups.setdefault(rt.group, [])
        if rt.version not in versions:
            versions.append(rt.version)
    return groups


def in_group_version(group: str, version: str) -> list[ResourceType]:
    return [rt for rt in _TYPES if rt.group == group and rt.version == version]


def all_types() -> tuple[ResourceType, ...]:
    return _TYPES
