"""`/openapi/v3`: enough OpenAPI for kubectl's default (strict) validation and for `explain`.

kubectl (≥ 1.27) looks up, per group-version document, a PATCH operation tagged with the
object's `x-kubernetes-group-version-kind` that declares the `fieldValidation` query
parameter; if it finds one it leaves validation to the server (it sends
`fieldValidation=Strict`). So each document lists the served paths with their operations
and parameters, and carries the kinds' schemas from the kubernetes-validate package,
rewritten to OpenAPI's `#/components/schemas/…` references.
"""

from __future__ import annotations

import hashlib
import json
from functools import cache
from importlib import resources as importlib_resources
from typing import Any

from kubesim import resources
from kubesim.resources import ResourceType
from kubesim.validation import SCHEMA_VERSION


def _gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def _param(name: str, schema_type: str = "string", where: str = "query") -> dict[str, Any]:
    return {
        "name": name,
        "in": where,
        "schema": {"type": schema_type, "uniqueItems": True},
        **({"required": True} if where == "path" else {}),
    }


_QUERY_WRITE = [_param("dryRun"), _param("fieldManager"), _param("fieldValidation")]
_QUERY_LIST = [
    _param(n)
    for n in (
        "labelSelector",
        "fieldSelector",
        "continue",
        "resourceVersion",
        "resourceVersionMatch",
    )
] + [
    _param("limit", "integer"),
    _param("timeoutSeconds", "integer"),
    _param("watch", "boolean"),
    _param("allowWatchBookmarks", "boolean"),
    _param("sendInitialEvents", "boolean"),
]


@cache
def _definitions() -> dict[str, Any]:
    path = f"kubernetes-json-schema/{SCHEMA_VERSION}-local/_definitions.json"
    ref = importlib_resources.files("kubernetes_validate").joinpath(path)
    with ref.open("r", encoding="utf-8") as f:
        definitions: dict[str, Any] = json.load(f)["$defs"]
    return definitions


def _rewrite(node: Any, needed: set[str]) -> Any:
    """JSON-schema refs -> OpenAPI component refs; collects the definitions used."""
    if isinstance(node, dict):
        out = {}
        for k, v in node.items():
            if k == "$ref" and isinstance(v, str) and "#/$defs/" in v:
                name = v.split("#/$defs/", 1)[1]
                needed.add(name)
                out["$ref"] = f"#/components/schemas/{name}"
            elif k == "type" and isinstance(v, list):
                # OpenAPI 3.0 has no type lists; ["string", "null"] -> string
                types = [t for t in v if t != "null"]
                out["type"] = types[0] if types else "object"
            else:
                out[k] = _rewrite(v, needed)
        return out
    if isinstance(node, list):
        return [_rewrite(v, needed) for v in node]
    return node


def _definition_name(rt: ResourceType) -> str | None:
    suffix = f".{rt.version}.{rt.kind}"
    for name in _definitions():
        if name.endswith(suffix) and (
            (rt.group == "" and ".api.core." in name)
            or (rt.group and f".api.{rt.group.split('.')[0]}." in name)
        ):
            return name
    return None


def _gvk(rt: ResourceType) -> dict[str, str]:
    return {"group": rt.group, "kind": rt.kind, "version": rt.version}


def _operations(rt: ResourceType, schema_ref: dict[str, Any]) -> dict[str, dict[str, Any]]:
    base = rt.path_prefix
    ns = "/namespaces/{namespace}" if rt.namespaced else ""
    path_params = [_param("namespace", where="path")] if rt.namespaced else []
    ok = {"200": {"description": "OK", "content": {"application/json": {"schema": schema_ref}}}}
    ext = {"x-kubernetes-group-version-kind": _gvk(rt)}

    def op(
        action: str,
        params: list[dict[str, Any]],
        with_body: bool = False,
        content: str = "application/json",
    ) -> dict[str, Any]:
        out: dict[str, Any] = {
            "operationId": f"{action}{rt.kind}",
            "parameters": params,
            "responses": ok,
            "x-kubernetes-action": action,
            **ext,
        }
        if with_body:
            out["requestBody"] = {"content": {content: {"schema": schema_ref}}, "required": True}
        return out

    patch_types = [
        "application/json-patch+json",
        "application/merge-patch+json",
        "application/strategic-merge-patch+json",
        "application/apply-patch+yaml",
    ]
    item_params = [*path_params, _param("name", where="path")]
    patch = op("patch", [*item_params, *_QUERY_WRITE, _param("force", "boolean")])
    patch["requestBody"] = {
        "content": {t: {"schema": {"type": "object"}} for t in patch_types},
        "required": True,
    }
    paths = {
        f"{base}{ns}/{rt.plural}": {
            "get": op("list", [*path_params, *_QUERY_LIST]),
            "post": op("post", [*path_params, *_QUERY_WRITE], with_body=True),
        },
        f"{base}{ns}/{rt.plural}/{{name}}": {
            "get": op("get", item_params),
            "put": op("put", [*item_params, *_QUERY_WRITE], with_body=True),
            "patch": patch,
            "delete": op(
                "delete",
                [
                    *item_params,
                    _param("dryRun"),
                    _param("gracePeriodSeconds", "integer"),
                    _param("propagationPolicy"),
                ],
            ),
        },
    }
    if "status" in rt.subresources:
        status_patch = dict(patch, operationId=f"patch{rt.kind}Status")
        paths[f"{base}{ns}/{rt.plural}/{{name}}/status"] = {
            "get": op("get", item_params),
            "put": op("put", [*item_params, *_QUERY_WRITE], with_body=True),
            "patch": status_patch,
        }
    return paths


@cache
def group_version_document(group: str, version: str) -> bytes | None:
    types = resources.in_group_version(group, version)
    if not types:
        return None
    needed: set[str] = set()
    paths: dict[str, Any] = {}
    for rt in types:
        name = _definition_name(rt)
        if name is None:
            schema_ref: dict[str, Any] = {"type": "object"}
        else:
            needed.add(name)
            schema_ref = {"$ref": f"#/components/schemas/{name}"}
        paths.update(_operations(rt, schema_ref))
    defs = _definitions()
    schemas: dict[str, Any] = {}
    pending = list(needed)
    while pending:
        name = pending.pop()
        if name in schemas or name not in defs:
            continue
        found: set[str] = set()
        schemas[name] = _rewrite(defs[name], found)
        pending.extend(found - set(schemas))
    for rt in types:  # the GVK tag tells kubectl (explain, apply) which schema a kind uses
        name = _definition_name(rt)
        if name in schemas:
            schemas[name] = dict(schemas[name])
            schemas[name]["x-kubernetes-group-version-kind"] = [_gvk(rt)]
    doc = {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": f"{SCHEMA_VERSION}-kubesim"},
        "paths": paths,
        "components": {"schemas": schemas},
    }
    return json.dumps(doc, separators=(",", ":")).encode()


@cache
def root_document() -> bytes:
    paths = {}
    for group, versions in resources.group_versions().items():
        for version in versions:
            doc = group_version_document(group, version) or b""
            digest = hashlib.sha512(doc).hexdigest()[:64].upper()
            gv = _gv_path(group, version)
            paths[gv] = {"serverRelativeURL": f"/openapi/v3/{gv}?hash={digest}"}
    return json.dumps({"paths": paths}, separators=(",", ":")).encode()
