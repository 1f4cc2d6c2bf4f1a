"""Discovery documents: /version, /api, /apis, /api/v1, /apis/<group>/<version>.

Aggregated discovery (`Accept: …;as=APIGroupDiscoveryList`) is not served: clients get the
plain documents and fall back to the legacy walk of each group-version, as FACTS.md notes.
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
}


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
            entries.append(
                {
                    "name": f"{rt.plural}/{sub}",
                    "singularName": "",
                    "namespaced": rt.namespaced,
                    "kind": rt.kind,
                    "verbs": list(_SUBRESOURCE_VERBS.get(sub, ("get",))),
                }
            )
    group_version = f"{group}/{version}" if group else version
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": entries,
    }
