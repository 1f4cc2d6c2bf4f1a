"""Decoding the Kubernetes protobuf request bodies that kubectl's typed commands send.

`kubectl create namespace|configmap|secret|service|deployment|job` post
`application/vnd.kubernetes.protobuf` and do not fall back to JSON, so kubesim reads that
encoding for the objects those commands build: the `k8s\\0` envelope, `runtime.Unknown`, and
the fields of the kinds below (numbers from k8s.io/api's generated.proto). Fields kubesim
does not know are skipped; Go's non-pointer zero values ("" / false / empty messages) are
dropped, as JSON's omitempty would. Responses stay JSON, which clients accept.
"""

from __future__ import annotations

import base64
from typing import Any

from kubesim.errors import bad_request

MAGIC = b"k8s\x00"

Schema = dict[int, tuple[str, Any, bool]]  # field number -> (name, type, repeated)

_STR, _BYTES, _INT, _BOOL = "string", "bytes", "int", "bool"
_MAP_STR, _MAP_BYTES, _MAP_QTY = "map_str", "map_bytes", "map_qty"
_INT_OR_STRING = "int_or_string"

TYPE_META: Schema = {1: ("apiVersion", _STR, False), 2: ("kind", _STR, False)}
UNKNOWN: Schema = {
    1: ("typeMeta", TYPE_META, False),
    2: ("raw", _BYTES, False),
    3: ("contentEncoding", _STR, False),
    4: ("contentType", _STR, False),
}
OWNER_REF: Schema = {
    1: ("kind", _STR, False),
    3: ("name", _STR, False),
    4: ("uid", _STR, False),
    5: ("apiVersion", _STR, False),
    6: ("controller", _BOOL, False),
    7: ("blockOwnerDeletion", _BOOL, False),
}
OBJECT_META: Schema = {
    1: ("name", _STR, False),
    2: ("generateName", _STR, False),
    3: ("namespace", _STR, False),
    5: ("uid", _STR, False),
    6: ("resourceVersion", _STR, False),
    11: ("labels", _MAP_STR, False),
    12: ("annotations", _MAP_STR, False),
    13: ("ownerReferences", OWNER_REF, True),
    14: ("finalizers", _STR, True),
}
LABEL_SELECTOR_REQ: Schema = {
    1: ("key", _STR, False),
    2: ("operator", _STR, False),
    3: ("values", _STR, True),
}
LABEL_SELECTOR: Schema = {
    1: ("matchLabels", _MAP_STR, False),
    2: ("matchExpressions", LABEL_SELECTOR_REQ, True),
}
CONTAINER_PORT: Schema = {
    1: ("name", _STR, False),
    2: ("hostPort", _INT, False),
    3: ("containerPort", _INT, False),
    4: ("protocol", _STR, False),
}
ENV_VAR: Schema = {1: ("name", _STR, False), 2: ("value", _STR, False)}
RESOURCES: Schema = {1: ("limits", _MAP_QTY, False), 2: ("requests", _MAP_QTY, False)}
CONTAINER: Schema = {
    1: ("name", _STR, False),
    2: ("image", _STR, False),
    3: ("command", _STR, True),
    4: ("args", _STR, True),
    5: ("workingDir", _STR, False),
    6: ("ports", CONTAINER_PORT, True),
    7: ("env", ENV_VAR, True),
    8: ("resources", RESOURCES, False),
    13: ("terminationMessagePath", _STR, False),
    14: ("imagePullPolicy", _STR, False),
    16: ("stdin", _BOOL, False),
    17: ("stdinOnce", _BOOL, False),
    18: ("tty", _BOOL, False),
    20: ("terminationMessagePolicy", _STR, False),
}
TOLERATION: Schema = {
    1: ("key", _STR, False),
    2: ("operator", _STR, False),
    3: ("value", _STR, False),
    4: ("effect", _STR, False),
    5: ("tolerationSeconds", _INT, False),
}
POD_SPEC: Schema = {
    2: ("containers", CONTAINER, True),
    3: ("restartPolicy", _STR, False),
    4: ("terminationGracePeriodSeconds", _INT, False),
    5: ("activeDeadlineSeconds", _INT, False),
    6: ("dnsPolicy", _STR, False),
    7: ("nodeSelector", _MAP_STR, False),
    8: ("serviceAccountName", _STR, False),
    10: ("nodeName", _STR, False),
    19: ("schedulerName", _STR, False),
    20: ("initContainers", CONTAINER, True),
    21: ("automountServiceAccountToken", _BOOL, False),
    22: ("tolerations", TOLERATION, True),
}
POD_TEMPLATE: Schema = {1: ("metadata", OBJECT_META, False), 2: ("spec", POD_SPEC, False)}
SERVICE_PORT: Schema = {
    1: ("name", _STR, False),
    2: ("protocol", _STR, False),
    3: ("port", _INT, False),
    4: ("targetPort", _INT_OR_STRING, False),
    5: ("nodePort", _INT, False),
    6: ("appProtocol", _STR, False),
}
SERVICE_SPEC: Schema = {
    1: ("ports", SERVICE_PORT, True),
    2: ("selector", _MAP_STR, False),
    3: ("clusterIP", _STR, False),
    4: ("type", _STR, False),
    5: ("externalIPs", _STR, True),
    7: ("sessionAffinity", _STR, False),
    8: ("loadBalancerIP", _STR, False),
    10: ("externalName", _STR, False),
}
ROLLING_UPDATE: Schema = {
    1: ("maxUnavailable", _INT_OR_STRING, False),
    2: ("maxSurge", _INT_OR_STRING, False),
}
STRATEGY: Schema = {1: ("type", _STR, False), 2: ("rollingUpdate", ROLLING_UPDATE, False)}
DEPLOYMENT_SPEC: Schema = {
    1: ("replicas", _INT, False),
    2: ("selector", LABEL_SELECTOR, False),
    3: ("template", POD_TEMPLATE, False),
    4: ("strategy", STRATEGY, False),
    5: ("minReadySeconds", _INT, False),
    6: ("revisionHistoryLimit", _INT, False),
    7: ("paused", _BOOL, False),
    9: ("progressDeadlineSeconds", _INT, False),
}
JOB_SPEC: Schema = {
    1: ("parallelism", _INT, False),
    2: ("completions", _INT, False),
    3: ("activeDeadlineSeconds", _INT, False),
    4: ("selector", LABEL_SELECTOR, False),
    5: ("manualSelector", _BOOL, False),
    6: ("template", POD_TEMPLATE, False),
    7: ("backoffLimit", _INT, False),
    8: ("ttlSecondsAfterFinished", _INT, False),
    9: ("completionMode", _STR, False),
    10: ("suspend", _BOOL, False),
}
NAMESPACE_SPEC: Schema = {1: ("finalizers", _STR, True)}

KINDS: dict[str, Schema] = {
    "Namespace": {1: ("metadata", OBJECT_META, False), 2: ("spec", NAMESPACE_SPEC, False)},
    "ConfigMap": {
        1: ("metadata", OBJECT_META, False),
        2: ("data", _MAP_STR, False),
        3: ("binaryData", _MAP_BYTES, False),
        4: ("immutable", _BOOL, False),
    },
    "Secret": {
        1: ("metadata", OBJECT_META, False),
        2: ("data", _MAP_BYTES, False),
        3: ("type", _STR, False),
        4: ("stringData", _MAP_STR, False),
        5: ("immutable", _BOOL, False),
    },
    "Service": {1: ("metadata", OBJECT_META, False), 2: ("spec", SERVICE_SPEC, False)},
    "Pod": {1: ("metadata", OBJECT_META, False), 2: ("spec", POD_SPEC, False)},
    "Deployment": {1: ("metadata", OBJECT_META, False), 2: ("spec", DEPLOYMENT_SPEC, False)},
    "Job": {1: ("metadata", OBJECT_META, False), 2: ("spec", JOB_SPEC, False)},
    "ServiceAccount": {
        1: ("metadata", OBJECT_META, False),
        4: ("automountServiceAccountToken", _BOOL, False),
    },
}


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise ValueError("truncated varint")
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def _fields(data: bytes) -> list[tuple[int, int, Any]]:
    """(field number, wire type, raw value) triples of one message."""
    out, pos = [], 0
    value: Any
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 2:
            length, pos = _varint(data, pos)
            value, pos = data[pos : pos + length], pos + length
        elif wire == 1:
            value, pos = data[pos : pos + 8], pos + 8
        elif wire == 5:
            value, pos = data[pos : pos + 4], pos + 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
        out.append((number, wire, value))
    return out


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _scalar(kind: Any, wire: int, value: Any) -> Any:
    if kind == _STR:
        return bytes(value).decode()
    if kind == _BYTES:
        return base64.b64encode(bytes(value)).decode()
    if kind == _INT:
        return _signed(value)
    if kind == _BOOL:
        return bool(value)
    if kind == _INT_OR_STRING:
        fields = {n: v for n, _, v in _fields(value)}
        return (
            bytes(fields.get(3, b"")).decode() if fields.get(1) == 1 else _signed(fields.get(2, 0))
        )
    if isinstance(kind, dict):
        return decode_message(bytes(value), kind)
    raise ValueError(f"unknown field type {kind}")


def decode_message(data: bytes, schema: Schema) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for number, wire, value in _fields(data):
        spec = schema.get(number)
        if spec is None:
            continue
        name, kind, repeated = spec
        if kind in (_MAP_STR, _MAP_BYTES, _MAP_QTY):
            entry = {n: v for n, _, v in _fields(value)}
            key = bytes(entry.get(1, b"")).decode()
            raw = entry.get(2, b"")
            if kind == _MAP_STR:
                item: Any = bytes(raw).decode()
            elif kind == _MAP_BYTES:
                item = base64.b64encode(bytes(raw)).decode()
            else:  # resource.Quantity {string = 1}
                item = bytes(dict((n, v) for n, _, v in _fields(raw)).get(1, b"")).decode()
            out.setdefault(name, {})[key] = item
            continue
        if repeated and kind == _INT and wire == 2:  # packed repeated ints
            pos, packed = 0, bytes(value)
            while pos < len(packed):
                v, pos = _varint(packed, pos)
                out.setdefault(name, []).append(_signed(v))
            continue
        decoded = _scalar(kind, wire, value)
        if repeated:
            out.setdefault(name, []).append(decoded)
        elif decoded not in ("", False, {}) or kind == _INT_OR_STRING:
            out[name] = decoded
    return out


def decode_object(body: bytes) -> dict[str, Any]:
    """A JSON-shaped object from a `k8s\\0`-enveloped protobuf body; 415-worthy kinds are a
    400 here, since the media type itself is one the server accepts."""
    if not body.startswith(MAGIC):
        raise bad_request("provided protobuf body is missing the k8s envelope")
    try:
        unknown = decode_message(body[len(MAGIC) :], UNKNOWN)
        type_meta = unknown.get("typeMeta") or {}
        kind = type_meta.get("kind", "")
        schema = KINDS.get(kind)
        if schema is None:
            raise bad_request(
                f"kubesim cannot read protobuf bodies of kind {kind!r}; send application/json"
            )
        raw = base64.b64decode(unknown.get("raw", ""))
        obj = {"apiVersion": type_meta.get("apiVersion"), "kind": kind}
        obj.update(decode_message(raw, schema))
        return obj
    except (ValueError, UnicodeDecodeError, IndexError) as e:
        raise bad_request(f"unable to decode protobuf body: {e}") from None
