"""Validation of created and updated objects, as the real API server does it.

Two layers:
- the Kubernetes JSON schema of the kind, as shipped by the `kubernetes-validate` package
  (the strict variant, so unknown fields can be told apart from wrong values);
- the checks the schema cannot express: object names (DNS-1123 subdomain / label / DNS-1035
  per kind), label syntax, container names and images, Job restart policies, Deployment
  selectors matching their template.

Wrong values are 422 Invalid with `details.causes`; a wrong JSON type is a decode error (400)
like the real server's; unknown fields are 400 under `fieldValidation=Strict`, a warning
under `Warn` (the default) and nothing under `Ignore`, and in both of these they are dropped:
the stored object does not have them.
"""

from __future__ import annotations

import json
import re
from functools import cache
from importlib import resources as importlib_resources
from typing import Any

import jsonschema
from referencing import Registry, Resource

from kubesim.errors import ApiError, bad_request, cause, invalid
from kubesim.resources import ResourceType

SCHEMA_VERSION = "v1.37.0"  # the newest kubernetes-validate ships; matches /version

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)
_DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")

SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
    "or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex "
    "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex "
    "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
DNS1035_MSG = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
    "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or "
    "'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
)

# Which name rule each kind's metadata.name follows in the real server.
_LABEL_NAMED = {"Namespace"}
_DNS1035_NAMED = {"Service"}
_PATH_SEGMENT_NAMED = {"Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"}


def _schema_file(rt: ResourceType, strict: bool) -> str:
    folder = f"{SCHEMA_VERSION}-local" + ("-strict" if strict else "")
    group = rt.group.split(".", 1)[0]
    suffix = f"{group}-{rt.version}" if group else rt.version
    return f"kubernetes-json-schema/{folder}/{rt.kind.lower()}-{suffix}.json"


def _load(path: str) -> Any:
    ref = importlib_resources.files("kubernetes_validate").joinpath(path)
    with ref.open("r", encoding="utf-8") as f:
        return json.load(f)


@cache
def _registry() -> Registry:
    defs = _load(f"kubernetes-json-schema/{SCHEMA_VERSION}-local-strict/_definitions.json")
    return Resource.from_contents(defs) @ Registry()


@cache
def _validator(rt: ResourceType) -> jsonschema.protocols.Validator | None:
    try:
        schema = _load(_schema_file(rt, strict=True))
    except FileNotFoundError:
        return None
    return jsonschema.Draft202012Validator(schema, registry=_registry())


def warm_up(types: list[ResourceType]) -> None:
    """Load schemas ahead of the first request (loading the definitions takes a moment)."""
    for rt in types:
        _validator(rt)


def _path(parts: Any) -> str:
    out = ""
    for p in parts:
        if isinstance(p, int):
            out += f"[{p}]"
        else:
            out += ("." if out else "") + str(p)
    return out


def _show(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"))[:200]
    return json.dumps(value)


_JSON_TYPES = {
    dict: "object",
    list: "array",
    str: "string",
    bool: "bool",
    int: "number",
    float: "number",
    type(None): "null",
}


class Findings:
    """Schema errors, sorted into what the server treats differently."""

    def __init__(self) -> None:
        self.causes: list[dict[str, str]] = []
        self.unknown_fields: list[str] = []
        # where each unknown field sits: the path of the object holding it, and its name
        self.unknown_at: list[tuple[tuple[str | int, ...], str]] = []
        self.type_errors: list[str] = []


def _leaf_errors(error: jsonschema.ValidationError) -> list[jsonschema.ValidationError]:
    # int-or-string and quantity fields are oneOf; report the value, not each branch.
    return [error]


def _collect(rt: ResourceType, obj: dict[str, Any]) -> Findings:
    found = Findings()
    validator = _validator(rt)
    if validator is None:
        return found
    for error in validator.iter_errors(obj):
        for e in _leaf_errors(error):
            field = _path(e.absolute_path)
            if e.validator == "required":
                m = re.match(r"^'(.+)' is a required property", e.message)
                name = m.group(1) if m else "?"
                full = f"{field}.{name}" if field else name
                found.causes.append(cause("FieldValueRequired", "Required value", full))
            elif e.validator == "additionalProperties":
                extra = re.findall(r"'([^']+)'", e.message.split("(")[-1])
                for name in extra or ["?"]:
                    found.unknown_fields.append(f"{field}.{name}" if field else name)
                    found.unknown_at.append((tuple(e.absolute_path), name))
            elif e.validator == "type":
                found.type_errors.append(
                    f"cannot unmarshal {_JSON_TYPES.get(type(e.instance), 'value')} into Go "
                    f"struct field {rt.kind}.{field} of type {e.validator_value}"
                )
            elif e.validator == "enum":
                allowed = ", ".join(_show(v) for v in e.validator_value if v is not None)
                found.causes.append(
                    cause(
                        "FieldValueNotSupported",
                        f"Unsupported value: {_show(e.instance)}: supported values: {allowed}",
                        field,
                    )
                )
            elif e.validator == "oneOf":
                found.type_errors.append(
                    f"cannot unmarshal {_JSON_TYPES.get(type(e.instance), 'value')} into Go "
                    f"struct field {rt.kind}.{field} of type string or number"
                )
            else:
                found.causes.append(
                    cause(
                        "FieldValueInvalid",
                        f"Invalid value: {_show(e.instance)}: {e.message}",
                        field,
                    )
                )
    return found


def _check_name(rt: ResourceType, meta: dict[str, Any], causes: list[dict[str, str]]) -> None:
    name = meta.get("name")
    if not name:
        if not meta.get("generateName"):
            causes.append(
                cause(
                    "FieldValueRequired",
                    "Required value: name or generateName is required",
                    "metadata.name",
                )
            )
        return
    if not isinstance(name, str):
        return
    if rt.kind in _PATH_SEGMENT_NAMED:
        if name in (".", "..") or "/" in name or "%" in name:
            causes.append(
                cause(
                    "FieldValueInvalid",
                    f"Invalid value: {_show(name)}: may not contain '/'",
                    "metadata.name",
                )
            )
        return
    if rt.kind in _LABEL_NAMED:
        ok, msg, limit = bool(_DNS1123_LABEL.match(name)), LABEL_MSG, 63
    elif rt.kind in _DNS1035_NAMED:
        ok, msg, limit = bool(_DNS1035_LABEL.match(name)), DNS1035_MSG, 63
    else:
        ok, msg, limit = bool(_DNS1123_SUBDOMAIN.match(name)), SUBDOMAIN_MSG, 253
    if len(name) > limit:
        causes.append(
            cause(
                "FieldValueInvalid",
                f"Invalid value: {_show(name)}: must be no more than {limit} characters",
                "metadata.name",
            )
        )
    elif not ok:
        causes.append(
            cause("FieldValueInvalid", f"Invalid value: {_show(name)}: {msg}", "metadata.name")
        )


def _check_labels(meta: dict[str, Any], causes: list[dict[str, str]], prefix: str) -> None:
    labels = meta.get("labels")
    if not isinstance(labels, dict):
        return
    for key, value in labels.items():
        name = key.split("/")[-1]
        prefix_part = key[: -len(name) - 1] if "/" in key else ""
        if (
            not _QUALIFIED_NAME.match(name)
            or len(name) > 63
            or (prefix_part and not _DNS1123_SUBDOMAIN.match(prefix_part))
        ):
            causes.append(
                cause(
                    "FieldValueInvalid",
                    f"Invalid value: {_show(key)}: name part must consist of alphanumeric "
                    "characters, '-', '_' or '.', and must start and end with an alphanumeric "
                    "character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
                    "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
                    f"{prefix}metadata.labels",
                )
            )
        if isinstance(value, str) and (len(value) > 63 or not _LABEL_VALUE.match(value)):
            causes.append(
                cause(
                    "FieldValueInvalid",
                    f"Invalid value: {_show(value)}: a valid label must be an empty string or "
                    "consist of alphanumeric characters, '-', '_' or '.', and must start and "
                    "end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or "
                    "'12345', regex used for validation is "
                    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
                    f"{prefix}metadata.labels",
                )
            )


def _check_pod_spec(spec: Any, prefix: str, causes: list[dict[str, str]]) -> None:
    if not isinstance(spec, dict):
        return
    containers = spec.get("containers")
    if isinstance(containers, list) and not containers:
        causes.append(cause("FieldValueRequired", "Required value", f"{prefix}containers"))
    seen: set[str] = set()
    for field in ("initContainers", "containers"):
        for i, c in enumerate(spec.get(field) or ()):
            if not isinstance(c, dict):
                continue
            where = f"{prefix}{field}[{i}]"
            name = c.get("name")
            if isinstance(name, str):
                if name in seen:
                    causes.append(
                        cause(
                            "FieldValueDuplicate",
                            f"Duplicate value: {_show(name)}",
                            f"{where}.name",
                        )
                    )
                elif not _DNS1123_LABEL.match(name):
                    causes.append(
                        cause(
                            "FieldValueInvalid",
                            f"Invalid value: {_show(name)}: {LABEL_MSG}",
                            f"{where}.name",
                        )
                    )
                seen.add(name)
            if not c.get("image"):
                causes.append(cause("FieldValueRequired", "Required value", f"{where}.image"))


_RESTART_POLICIES = ("Always", "OnFailure", "Never")


def _check_kind_rules(rt: ResourceType, obj: dict[str, Any], causes: list[dict[str, str]]) -> None:
    spec = obj.get("spec")
    if rt.kind == "Pod":
        _check_pod_spec(spec, "spec.", causes)
        policy = spec.get("restartPolicy") if isinstance(spec, dict) else None
        if policy is not None and policy not in _RESTART_POLICIES:
            supported = ", ".join(_show(p) for p in _RESTART_POLICIES)
            causes.append(cause("FieldValueNotSupported",
                                f"Unsupported value: {_show(policy)}: supported values: "
                                f"{supported}", "spec.restartPolicy"))
        return
    if not isinstance(spec, dict) or rt.kind not in ("Deployment", "ReplicaSet", "Job"):
        return
    template = spec.get("template")
    if isinstance(template, dict):
        tmeta = template.get("metadata")
        if isinstance(tmeta, dict):
            _check_labels(tmeta, causes, "spec.template.")
        _check_pod_spec(template.get("spec"), "spec.template.spec.", causes)
        tspec = template.get("spec") or {}
        policy = tspec.get("restartPolicy") if isinstance(tspec, dict) else None
        if rt.kind == "Job" and policy not in ("OnFailure", "Never"):
            if policy is None or policy == "Always":
                causes.append(
                    cause(
                        "FieldValueNotSupported" if policy else "FieldValueRequired",
                        (
                            f"Unsupported value: {_show(policy)}: supported values: "
                            '"OnFailure", "Never"'
                        )
                        if policy
                        else 'Required value: valid values: "OnFailure", "Never"',
                        "spec.template.spec.restartPolicy",
                    )
                )
    if rt.kind in ("Deployment", "ReplicaSet") and isinstance(spec.get("selector"), dict):
        from kubesim.selectors import selector_from_match

        labels = ((template or {}).get("metadata") or {}).get("labels") or {}
        try:
            selector = selector_from_match(spec["selector"])
        except ApiError:
            return
        if selector.empty:
            causes.append(
                cause(
                    "FieldValueInvalid",
                    "Invalid value: {}: empty selector is invalid for deployment",
                    "spec.selector",
                )
            )
        elif not selector.matches(labels):
            causes.append(
                cause(
                    "FieldValueInvalid",
                    f"Invalid value: {_show(labels)}: `selector` does not match template `labels`",
                    "spec.template.metadata.labels",
                )
            )


def _drop_field(obj: Any, path: tuple[str | int, ...], name: str) -> None:
    node = obj
    for part in path:
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            return
    if isinstance(node, dict):
        node.pop(name, None)


def validate(rt: ResourceType, obj: dict[str, Any], *, field_validation: str = "Warn") -> list[str]:
    """Raise 422 Invalid (or 400) if `obj` is not a valid `rt`; returns warnings to send.

    Unknown fields are removed from `obj` unless refused (`Strict`): the real server decodes a
    built-in kind into its typed struct, which has no place for them, so they are not stored.
    """
    meta = obj.get("metadata")
    if meta is not None and not isinstance(meta, dict):
        raise bad_request(
            f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: json: '
            f"cannot unmarshal {_JSON_TYPES.get(type(meta), 'value')} into Go struct field "
            f"{rt.kind}.metadata of type v1.ObjectMeta"
        )
    meta = meta or {}
    found = _collect(rt, obj)
    if found.type_errors:
        raise bad_request(
            f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: json: '
            + found.type_errors[0]
        )
    warnings: list[str] = []
    if found.unknown_fields:
        unknown = [f'unknown field "{f}"' for f in found.unknown_fields]
        if field_validation == "Strict":
            detail = unknown[0] if len(unknown) == 1 else ", ".join(unknown)
            raise bad_request(f"strict decoding error: {detail}")
        if field_validation != "Ignore":
            warnings.extend(unknown)
        for path, name in found.unknown_at:  # decoded into the typed object: they are lost
            _drop_field(obj, path, name)
    causes = [c for c in found.causes if not c["field"].startswith("metadata.name")]
    name_causes: list[dict[str, str]] = []
    _check_name(rt, meta, name_causes)
    _check_labels(meta, name_causes, "")
    _check_kind_rules(rt, obj, causes)
    all_causes = name_causes + _dedupe(causes)
    if all_causes:
        raise invalid(
            rt.kind,
            str(meta.get("name") or meta.get("generateName") or ""),
            all_causes,
            group=rt.group,
        )
    return warnings


def _dedupe(causes: list[dict[str, str]]) -> list[dict[str, str]]:
    seen: set[tuple[str, str]] = set()
    out = []
    for c in causes:
        key = (c["field"], c["message"])
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out


UPDATABLE_POD_FIELDS = ",".join([
    "`spec.containers[*].image`",
    "`spec.initContainers[*].image`",
    "`spec.activeDeadlineSeconds`",
    "`spec.tolerations` (only additions to existing tolerations)",
    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
])


def validate_pod_update(new: dict[str, Any], old: dict[str, Any]) -> None:
    """A pod's spec is immutable but for a few fields (422 `spec: Forbidden: pod updates may
    not change fields other than …`). `new` must carry the server's defaults already.
    Leniency: tolerations may change freely here (the real server allows additions only);
    the scheduler's binding (spec.nodeName) does not come through this path."""
    old_spec, new_spec = old.get("spec"), new.get("spec")
    if not isinstance(old_spec, dict) or not isinstance(new_spec, dict):
        return
    munged = json.loads(json.dumps(new_spec))
    for field in ("containers", "initContainers"):
        old_list, new_list = old_spec.get(field) or [], munged.get(field) or []
        if len(old_list) == len(new_list):
            for old_c, new_c in zip(old_list, new_list, strict=True):
                if isinstance(old_c, dict) and isinstance(new_c, dict) and "image" in old_c:
                    new_c["image"] = old_c["image"]
    for field in ("activeDeadlineSeconds", "tolerations", "terminationGracePeriodSeconds",
                  "schedulingGates", "nodeName"):
        if field in old_spec:
            munged[field] = old_spec[field]
        else:
            munged.pop(field, None)
    if munged != old_spec:
        message = f"Forbidden: pod updates may not change fields other than {UPDATABLE_POD_FIELDS}"
        raise invalid("Pod", str((new.get("metadata") or {}).get("name") or ""),
                      [cause("FieldValueForbidden", message, "spec")])
