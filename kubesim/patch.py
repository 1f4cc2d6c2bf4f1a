"""PATCH bodies: JSON merge patch (RFC 7386), strategic merge patch, JSON patch (RFC 6902).

Strategic merge patch is the flavour kubectl sends. Real Kubernetes reads merge keys from
struct tags; here a table of the common list fields stands in (containers, env, ports,
volumes, … merged by name/key); other lists are replaced, as the real server does for
lists without a merge key. Directives handled: `$patch: delete|replace|merge`,
`$setElementOrder/…` (ignored), `$retainKeys`, `$deleteFromPrimitiveList/…`.
"""

from __future__ import annotations

import copy
from typing import Any

from kubesim.errors import ApiError, bad_request

# Field name -> merge key of its list items.
MERGE_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "imagePullSecrets": "name",
    "ownerReferences": "uid",
    "conditions": "type",
    "hostAliases": "ip",
    "resourceClaims": "name",
    "topologySpreadConstraints": "topologyKey",
    "subsets": "",  # endpoints subsets: replace
}
# Lists of scalars that merge as sets.
MERGE_SETS = {"finalizers"}


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, null deletes, everything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _list_merge_key(field: str, items: list[Any]) -> str | None:
    if field == "ports":
        # container ports merge by containerPort, service ports by port
        sample = next((i for i in items if isinstance(i, dict)), {})
        return "containerPort" if "containerPort" in sample else "port"
    key = MERGE_KEYS.get(field)
    return key or None


def _merge_list(field: str, target: list[Any], patch: list[Any]) -> list[Any]:
    key = _list_merge_key(field, patch + target)
    if key is None:
        return copy.deepcopy([p for p in patch if not _is_directive(p)])
    result = [copy.deepcopy(item) for item in target]
    for item in patch:
        if not isinstance(item, dict):
            continue
        directive = item.get("$patch")
        if directive == "replace":
            return copy.deepcopy([i for i in patch if isinstance(i, dict) and "$patch" not in i])
        match = next(
            (
                i
                for i, cur in enumerate(result)
                if isinstance(cur, dict) and key in item and cur.get(key) == item.get(key)
            ),
            None,
        )
        if directive == "delete":
            if match is not None:
                result.pop(match)
            continue
        if match is None:
            result.append(strategic_merge(None, item))
        else:
            result[match] = strategic_merge(result[match], item)
    return result


def _is_directive(value: Any) -> bool:
    return isinstance(value, dict) and "$patch" in value and len(value) == 1


def strategic_merge(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if patch.get("$patch") == "delete":
        return None
    result = dict(target) if isinstance(target, dict) else {}
    retain = patch.get("$retainKeys")
    for key, value in patch.items():
        if key.startswith("$setElementOrder/") or key in ("$patch", "$retainKeys"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            if isinstance(result.get(field), list):
                result[field] = [v for v in result[field] if v not in (value or [])]
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            merged = strategic_merge(result.get(key), value)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        elif isinstance(value, list) and isinstance(result.get(key), list):
            if key in MERGE_SETS:
                result[key] = list(result[key]) + [v for v in value if v not in result[key]]
            else:
                result[key] = _merge_list(key, result[key], value)
        elif isinstance(value, list):
            result[key] = [
                strategic_merge(None, v)
                for v in value
                if not _is_directive(v)
                and not (isinstance(v, dict) and v.get("$patch") == "delete")
            ]
        else:
            result[key] = value
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    return result


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise _patch_error(f"JSON pointer must start with '/': {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _patch_error(message: str) -> ApiError:
    return ApiError(
        422,
        "Invalid",
        f"the server rejected our request due to an error in our request: {message}",
        {},
    )


def _parent(doc: Any, parts: list[str]) -> tuple[Any, str]:
    node = doc
    for part in parts[:-1]:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise _patch_error(f"doc is missing path: /{'/'.join(parts)}")
    return node, parts[-1]


def _get(doc: Any, parts: list[str]) -> Any:
    if not parts:
        return doc
    parent, last = _parent(doc, parts)
    if isinstance(parent, dict) and last in parent:
        return parent[last]
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return parent[int(last)]
    raise _patch_error(f"doc is missing path: /{'/'.join(parts)}")


def _remove(doc: Any, parts: list[str]) -> Any:
    parent, last = _parent(doc, parts)
    if isinstance(parent, dict) and last in parent:
        return parent.pop(last)
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return parent.pop(int(last))
    raise _patch_error(f"doc is missing path: /{'/'.join(parts)}")


def _add(doc: Any, parts: list[str], value: Any) -> Any:
    if not parts:
        return value
    parent, last = _parent(doc, parts)
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-":
            parent.append(value)
        elif last.isdigit() and int(last) <= len(parent):
            parent.insert(int(last), value)
        else:
            raise _patch_error(f"index out of range: {last}")
    else:
        raise _patch_error(f"doc is missing path: /{'/'.join(parts)}")
    return doc


def json_patch(doc: Any, operations: Any) -> Any:
    if not isinstance(operations, list):
        raise bad_request("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
    doc = copy.deepcopy(doc)
    for op in operations:
        if not isinstance(op, dict) or "op" not in op:
            raise bad_request("invalid JSON patch operation")
        kind, parts = op["op"], _pointer(op.get("path", ""))
        if kind == "add":
            doc = _add(doc, parts, copy.deepcopy(op.get("value")))
        elif kind == "remove":
            _remove(doc, parts)
        elif kind == "replace":
            if parts:
                _get(doc, parts)  # must exist
                _remove(doc, parts)
            doc = _add(doc, parts, copy.deepcopy(op.get("value")))
        elif kind == "move":
            value = _remove(doc, _pointer(op.get("from", "")))
            doc = _add(doc, parts, value)
        elif kind == "copy":
            doc = _add(doc, parts, copy.deepcopy(_get(doc, _pointer(op.get("from", "")))))
        elif kind == "test":
            if _get(doc, parts) != op.get("value"):
                raise _patch_error(f"testing value /{'/'.join(parts)} failed")
        else:
            raise bad_request(f"Unexpected kind: {kind}")
    return doc
