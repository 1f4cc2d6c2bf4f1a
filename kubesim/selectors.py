"""Label and field selectors, parsed once per request and matched against stored objects.

Grammar and field sets follow the real API server: labels support `=`, `==`, `!=`, `in`,
`notin`, `key` (exists) and `!key`; fields support `=`, `==`, `!=` on the few fields each
kind indexes, anything else is `field label not supported: <field>` (400).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubesim.errors import ApiError, bad_request

_LABEL_KEY = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!exists"
    values: frozenset[str] = frozenset()

    def matches(self, labels: dict[str, str]) -> bool:
        op = self.op
        if op == "=":
            return labels.get(self.key) in self.values
        if op == "in":
            return labels.get(self.key) in self.values
        if op == "!=" or op == "notin":
            return labels.get(self.key) not in self.values
        if op == "exists":
            return self.key in labels
        return self.key not in labels


class LabelSelector:
    def __init__(self, requirements: list[Requirement]) -> None:
        self.requirements = requirements

    def matches(self, labels: dict[str, str] | None) -> bool:
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)

    @property
    def empty(self) -> bool:
        return not self.requirements

    def __str__(self) -> str:
        """The selector's string form, as the real `labels.Selector.String()`: requirements
        sorted by key (`app=web,tier in (a,b)`)."""
        def one(r: Requirement) -> str:
            values = ",".join(sorted(r.values))
            if r.op == "=":
                return f"{r.key}={values}"
            if r.op == "!=":
                return f"{r.key}!={values}"
            if r.op in ("in", "notin"):
                return f"{r.key} {r.op} ({values})"
            return r.key if r.op == "exists" else f"!{r.key}"

        return ",".join(one(r) for r in sorted(self.requirements, key=lambda r: r.key))


def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside `( … )`."""
    parts: list[str] = []
    depth, current = 0, []  # type: int, list[str]
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return parts


def _check_key(key: str, raw: str) -> str:
    if not _LABEL_KEY.match(key) or len(key.split("/")[-1]) > 63:
        raise bad_request(
            f"unable to parse requirement: {raw!r}: invalid label key {key!r}: name part must "
            "consist of alphanumeric characters, '-', '_' or '.', and must start and end with "
            "an alphanumeric character"
        )
    return key


def _check_value(value: str, raw: str) -> str:
    if not _LABEL_VALUE.match(value):
        raise bad_request(
            f"unable to parse requirement: {raw!r}: invalid label value: {value!r}: a valid "
            "label must be an empty string or consist of alphanumeric characters, '-', '_' or "
            "'.', and must start and end with an alphanumeric character"
        )
    return value


_SET_RE = re.compile(r"^\s*(\S+)\s+(in|notin)\s*\((.*)\)\s*$")


def parse_label_selector(text: str | None) -> LabelSelector:
    """Parse `a=b,c!=d,e in (x,y),!f`; raises a 400 ApiError on bad syntax."""
    requirements: list[Requirement] = []
    if not text or not text.strip():
        return LabelSelector(requirements)
    for raw in _split_top_level(text):
        part = raw.strip()
        if not part:
            raise bad_request(
                f"unable to parse requirement: found '', expected: identifier in {text!r}"
            )
        m = _SET_RE.match(part)
        if m:
            key, op, inner = m.group(1), m.group(2), m.group(3)
            values = frozenset(_check_value(v.strip(), part) for v in inner.split(","))
            requirements.append(Requirement(_check_key(key, part), op, values))
            continue
        for op in ("!=", "==", "="):
            if op in part:
                key, value = part.split(op, 1)
                key, value = key.strip(), value.strip()
                norm = "!=" if op == "!=" else "="
                requirements.append(
                    Requirement(_check_key(key, part), norm, frozenset({_check_value(value, part)}))
                )
                break
        else:
            if part.startswith("!"):
                requirements.append(Requirement(_check_key(part[1:].strip(), part), "!exists"))
            elif " " in part or "(" in part or ")" in part:
                raise bad_request(f"unable to parse requirement: {part!r}: unexpected syntax")
            else:
                requirements.append(Requirement(_check_key(part, part), "exists"))
    return LabelSelector(requirements)


def selector_from_match(spec: dict[str, Any] | None) -> LabelSelector:
    """A LabelSelector from a `metav1.LabelSelector` dict (matchLabels, matchExpressions)."""
    requirements: list[Requirement] = []
    if not spec:
        return LabelSelector(requirements)
    for key, value in (spec.get("matchLabels") or {}).items():
        requirements.append(Requirement(key, "=", frozenset({value})))
    ops = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!exists"}
    for expr in spec.get("matchExpressions") or []:
        op = ops.get(expr.get("operator", ""))
        if op is None:
            raise bad_request(f"{expr.get('operator')!r} is not a valid label selector operator")
        requirements.append(Requirement(expr["key"], op, frozenset(expr.get("values") or ())))
    return LabelSelector(requirements)


# Fields each kind can be selected by, beyond metadata.name and metadata.namespace.
_COMMON_FIELDS = ("metadata.name", "metadata.namespace")
_KIND_FIELDS: dict[str, tuple[str, ...]] = {
    "Pod": (
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
    ),
    "Event": (
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    ),
    "Namespace": ("status.phase",),
    "Node": ("spec.unschedulable",),
    "Secret": ("type",),
    "Job": ("status.successful",),
    "ReplicaSet": ("status.replicas",),
}


def _field_value(obj: dict[str, Any], path: str) -> str:
    if path == "source":  # events: the source component
        return str((obj.get("source") or {}).get("component") or "")
    value: Any = obj
    for part in path.split("."):
        if not isinstance(value, dict):
            return ""
        value = value.get(part)
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@dataclass(frozen=True)
class FieldRequirement:
    path: str
    negate: bool
    value: str

    def matches(self, obj: dict[str, Any]) -> bool:
        return (_field_value(obj, self.path) == self.value) != self.negate


class FieldSelector:
    def __init__(self, requirements: list[FieldRequirement]) -> None:
        self.requirements = requirements

    def matches(self, obj: dict[str, Any]) -> bool:
        return all(r.matches(obj) for r in self.requirements)

    @property
    def empty(self) -> bool:
        return not self.requirements

    def exact_name(self) -> str | None:
        """The name a `metadata.name=x` requirement pins, for a direct lookup."""
        for r in self.requirements:
            if r.path == "metadata.name" and not r.negate:
                return r.value
        return None


def parse_field_selector(text: str | None, kind: str) -> FieldSelector:
    requirements: list[FieldRequirement] = []
    if not text or not text.strip():
        return FieldSelector(requirements)
    allowed = _COMMON_FIELDS + _KIND_FIELDS.get(kind, ())
    for raw in text.split(","):
        part = raw.strip()
        for op in ("!=", "==", "="):
            if op in part:
                path, value = part.split(op, 1)
                break
        else:
            raise bad_request(f"invalid selector: '{text}'; can't understand '{part}'")
        path = path.strip()
        if path not in allowed:
            raise bad_request(f"field label not supported: {path}")
        requirements.append(FieldRequirement(path, op == "!=", value.strip()))
    return FieldSelector(requirements)


Matcher = Callable[[dict[str, Any]], bool]


def matcher(label: LabelSelector, field: FieldSelector) -> Matcher | None:
    """One predicate for both selectors, or None when nothing is selected."""
    if label.empty and field.empty:
        return None

    def match(obj: dict[str, Any]) -> bool:
        return label.matches(obj["metadata"].get("labels")) and field.matches(obj)

    return match


__all__ = [
    "ApiError",
    "FieldSelector",
    "LabelSelector",
    "Matcher",
    "matcher",
    "parse_field_selector",
    "parse_label_selector",
    "selector_from_match",
]
