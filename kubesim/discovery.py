"""Discovery documents: /version, /api, /apis, /api/v1, /apis/<group>/<version>.

Aggregated discovery (`Accept: application/json;g=apidiscovery.k8s.io;v=v2;
as=APIGroupDiscoveryList`) is served on /api and /apis as the real server does, so clients
(kubectl, client-go) learn every resource in two requests instead of walking each
group-version.
"""

from __future__ import annotations

import hashlib
from typing import Any

from kubesim import resources
from kubesim.resources import ResourceType

# The Kubernetes release whose schemas kubesim validates against (kubernetes-validate).
MAJOR, MINOR = "1", "37"

_SUBRESOURCE_VERBS = {
    "status": ("get", "patch", "update"),
    "log": ("get",),
    "finalize": ("update",),
    "scale": ("get", "patch", "update"),
}
# subresources served as another kind: (group, version, kind)
_SUBRESOURCE_KINDS = {"scale": ("autoscaling", "v1", "Scale")}


def version_info() -> dict[str, str]:
    return {
        "major": MAJOR,
        "minor": MINOR,
        "emulationMajor": MAJOR,
        "emulationMinor": MINOR,
        "minCompatibilityMajor": MAJOR,
        "minCompatibilityMinor": str(int(MINOR) - 1),
        "gitVersion": f"v{MAJOR}.{MINOR}.0-kubesim",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.25.0",
        "compiler": "gc",
        "platform": "linux/amd64",
    }


def api_versions(server_address: str) -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}
        ],
    }


def _group(name: str, versions: list[str]) -> dict[str, Any]:
    gvs = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": gvs, "preferredVersion": gvs[0]}


def api_group_list() -> dict[str, Any]:
    groups = [_group(g, vs) for g, vs in resources.group_versions().items() if g]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(name: str) -> dict[str, Any] | None:
    versions = resources.group_versions().get(name)
    if not name or not versions:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(name, versions)}


def _storage_hash(rt: ResourceType) -> str:
    import base64

    digest = hashlib.sha256(f"{rt.api_version}/{rt.kind}".encode()).digest()
    return base64.b64encode(digest[:8]).decode()


def api_resource_list(group: str, version: str) -> dict[str, Any] | None:
    types = resources.in_group_version(group, version)
    if not types:
        return None
    entries: list[dict[str, Any]] = []
    for rt in types:
        entry: dict[str, Any] = {
            "name": rt.plural,
            "singularName": rt.singular,
            "namespaced": rt.namespaced,
            "kind": rt.kind,
            "verbs": list(rt.verbs),
        }
        if rt.short_names:
            entry["shortNames"] = list(rt.short_names)
        if rt.categories:
            entry["categories"] = list(rt.categories)
        entry["storageVersionHash"] = _storage_hash(rt)
        entries.append(entry)
        for sub in rt.subresources:
            sub_entry: dict[str, Any] = {
                "name": f"{rt.plural}/{sub}",
                "singularName": "",
                "namespaced": rt.namespaced,
                "kind": rt.kind,
                "verbs": list(_SUBRESOURCE_VERBS.get(sub, ("get",))),
            }
            if sub in _SUBRESOURCE_KINDS:
                group_, version_, kind = _SUBRESOURCE_KINDS[sub]
                sub_entry.update(group=group_, version=version_, kind=kind)
            entries.append(sub_entry)
    group_version = f"{group}/{version}" if group else version
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": entries,
    }


AGGREGATED_TYPE = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"


def wants_aggregated(accept: str) -> bool:
    """Whether the client's Accept header asks for aggregated discovery first (or only)."""
    for part in accept.split(","):
        params = {k.strip(): v.strip() for k, _, v in
                  (p.partition("=") for p in part.split(";")[1:])}
        if (params.get("g") == "apidiscovery.k8s.io" and params.get("v") == "v2"
                and params.get("as") == "APIGroupDiscoveryList"):
            return True
        if part.strip():
            return False  # something else is preferred
    return False


def _aggregated_resource(rt: ResourceType) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "resource": rt.plural,
        "responseKind": {"group": "", "version": "", "kind": rt.kind},
        "scope": "Namespaced" if rt.namespaced else "Cluster",
        "singularResource": rt.singular,
        "verbs": list(rt.verbs),
    }
    if rt.short_names:
        entry["shortNames"] = list(rt.short_names)
    if rt.categories:
        entry["categories"] = list(rt.categories)
    subresources = []
    for sub in rt.subresources:
        group, version, kind = _SUBRESOURCE_KINDS.get(sub, ("", "", rt.kind))
        subresources.append({"subresource": sub,
                             "responseKind": {"group": group, "version": version, "kind": kind},
                             "verbs": list(_SUBRESOURCE_VERBS.get(sub, ("get",)))})
    if subresources:
        entry["subresources"] = subresources
    return entry


def aggregated(core: bool) -> dict[str, Any]:
    """The APIGroupDiscoveryList of /api (core=True) or /apis."""
    items = []
    for group, versions in resources.group_versions().items():
        if bool(group) == core:
            continue
        metadata: dict[str, Any] = {"creationTimestamp": None}
        if group:
            metadata["name"] = group
        items.append({"metadata": metadata, "versions": [
            {"version": v, "resources": [_aggregated_resource(rt)
                                         for rt in resources.in_group_version(group, v)],
             "freshness": "Current"} for v in versions]})
    return {"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2",
            "metadata": {}, "items": items}
