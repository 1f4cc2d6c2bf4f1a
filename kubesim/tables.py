"""`meta.k8s.io/v1` Table output, what `kubectl get` asks for (`Accept: …;as=Table`).

Columns follow kubectl's built-in printers for the kinds the portal and its users look at;
any other kind gets the real server's generic Name / Age table. Priority-1 columns are the
ones `-o wide` adds.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

Column = tuple[str, str, int]  # name, type, priority
Row = list[Any]

_NAME: Column = ("Name", "string", 0)
_AGE: Column = ("Age", "string", 0)


def human_duration(seconds: float) -> str:
    """kubectl's short age format: 5s, 3m2s, 4h, 2d3h, 10d…"""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    m = s // 60
    if m < 10:
        return f"{m}m{s % 60}s" if s % 60 else f"{m}m"
    if m < 180:
        return f"{m}m"
    h = m // 60
    if h < 8:
        return f"{h}h{m % 60}m" if m % 60 else f"{h}h"
    if h < 48:
        return f"{h}h"
    d = h // 24
    if h < 24 * 8:
        return f"{d}d{h % 24}h" if h % 24 else f"{d}d"
    if d < 365 * 2:
        return f"{d}d"
    y = d // 365
    if d < 365 * 8:
        return f"{y}y{d % 365}d" if d % 365 else f"{y}y"
    return f"{y}y"


def _age(ts: str | None) -> str:
    if not ts:
        return "<unknown>"
    try:
        then = datetime.strptime(ts, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return "<unknown>"
    return human_duration((datetime.now(UTC) - then).total_seconds())


def _created(obj: dict[str, Any]) -> str:
    return _age(obj["metadata"].get("creationTimestamp"))


def _pod_status(pod: dict[str, Any]) -> str:
    status = pod.get("status") or {}
    reason = status.get("reason") or status.get("phase") or "Unknown"
    for cs in status.get("containerStatuses") or ():
        state = cs.get("state") or {}
        if state.get("waiting", {}).get("reason"):
            reason = state["waiting"]["reason"]
        elif "terminated" in state:
            term = state["terminated"]
            reason = term.get("reason") or (
                f"Signal:{term['signal']}"
                if term.get("signal")
                else f"ExitCode:{term.get('exitCode', 0)}"
            )
    if pod["metadata"].get("deletionTimestamp"):
        reason = "Terminating"
    return reason


def _pod(pod: dict[str, Any]) -> Row:
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    statuses = status.get("containerStatuses") or ()
    ready = sum(1 for cs in statuses if cs.get("ready"))
    restarts = sum(int(cs.get("restartCount") or 0) for cs in statuses)
    return [
        pod["metadata"]["name"],
        f"{ready}/{len(spec.get('containers') or ())}",
        _pod_status(pod),
        restarts,
        _created(pod),
        status.get("podIP") or "<none>",
        spec.get("nodeName") or "<none>",
        status.get("nominatedNodeName") or "<none>",
        "<none>",
    ]


def _containers(template_spec: dict[str, Any]) -> tuple[str, str]:
    containers = template_spec.get("containers") or ()
    return (
        ",".join(c.get("name", "") for c in containers),
        ",".join(c.get("image", "") for c in containers),
    )


def _selector(sel: dict[str, Any] | None) -> str:
    if not sel:
        return "<none>"
    parts = [f"{k}={v}" for k, v in (sel.get("matchLabels") or {}).items()]
    for e in sel.get("matchExpressions") or ():
        op = {"In": "in", "NotIn": "notin"}.get(e.get("operator"), e.get("operator"))
        parts.append(f"{e.get('key')} {op} ({','.join(e.get('values') or ())})")
    return ",".join(parts) or "<none>"


def _workload_wide(obj: dict[str, Any]) -> list[str]:
    spec = obj.get("spec") or {}
    names, images = _containers((spec.get("template") or {}).get("spec") or {})
    return [names, images, _selector(spec.get("selector"))]


def _deployment(d: dict[str, Any]) -> Row:
    spec, status = d.get("spec") or {}, d.get("status") or {}
    return [
        d["metadata"]["name"],
        f"{status.get('readyReplicas', 0)}/{spec.get('replicas', 0)}",
        status.get("updatedReplicas", 0),
        status.get("availableReplicas", 0),
        _created(d),
        *_workload_wide(d),
    ]


def _replicaset(rs: dict[str, Any]) -> Row:
    spec, status = rs.get("spec") or {}, rs.get("status") or {}
    return [
        rs["metadata"]["name"],
        spec.get("replicas", 0),
        status.get("replicas", 0),
        status.get("readyReplicas", 0),
        _created(rs),
        *_workload_wide(rs),
    ]


def _job(job: dict[str, Any]) -> Row:
    spec, status = job.get("spec") or {}, job.get("status") or {}
    conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or ()}
    if conditions.get("Complete") == "True":
        state = "Complete"
    elif conditions.get("Failed") == "True":
        state = "Failed"
    elif spec.get("suspend"):
        state = "Suspended"
    else:
        state = "Running"
    completions = spec.get("completions")
    done = f"{status.get('succeeded', 0)}/{completions if completions is not None else 1}"
    duration = ""
    start = status.get("startTime")
    if start:
        end = status.get("completionTime")
        try:
            t0 = datetime.strptime(start, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
            t1 = (
                datetime.strptime(end, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
                if end
                else datetime.now(UTC)
            )
            duration = human_duration((t1 - t0).total_seconds())
        except ValueError:
            duration = ""
    return [job["metadata"]["name"], state, done, duration, _created(job), *_workload_wide(job)]


def _service(svc: dict[str, Any]) -> Row:
    spec, status = svc.get("spec") or {}, svc.get("status") or {}
    svc_type = spec.get("type", "ClusterIP")
    ingress = (status.get("loadBalancer") or {}).get("ingress") or ()
    external = ",".join(i.get("ip") or i.get("hostname", "") for i in ingress)
    if not external:
        external = ",".join(spec.get("externalIPs") or ()) or (
            "<pending>" if svc_type == "LoadBalancer" else "<none>"
        )
    ports = []
    for p in spec.get("ports") or ():
        text = str(p.get("port"))
        if p.get("nodePort"):
            text += f":{p['nodePort']}"
        ports.append(f"{text}/{p.get('protocol', 'TCP')}")
    selector = ",".join(f"{k}={v}" for k, v in (spec.get("selector") or {}).items())
    return [
        svc["metadata"]["name"],
        svc_type,
        spec.get("clusterIP") or "<none>",
        external,
        ",".join(ports) or "<none>",
        _created(svc),
        selector or "<none>",
    ]


def _node(node: dict[str, Any]) -> Row:
    spec, status = node.get("spec") or {}, node.get("status") or {}
    ready = next((c for c in status.get("conditions") or () if c.get("type") == "Ready"), None)
    state = (
        "Ready" if ready and ready.get("status") == "True" else ("NotReady" if ready else "Unknown")
    )
    if spec.get("unschedulable"):
        state += ",SchedulingDisabled"
    labels = node["metadata"].get("labels") or {}
    roles = sorted(
        k.split("/", 1)[1] for k in labels if k.startswith("node-role.kubernetes.io/") and "/" in k
    )
    info = status.get("nodeInfo") or {}
    addresses = {a.get("type"): a.get("address") for a in status.get("addresses") or ()}
    return [
        node["metadata"]["name"],
        state,
        ",".join(roles) or "<none>",
        _created(node),
        info.get("kubeletVersion", ""),
        addresses.get("InternalIP", "<none>"),
        addresses.get("ExternalIP", "<none>"),
        info.get("osImage", ""),
        info.get("kernelVersion", ""),
        info.get("containerRuntimeVersion", ""),
    ]


def _namespace(ns: dict[str, Any]) -> Row:
    return [ns["metadata"]["name"], (ns.get("status") or {}).get("phase", ""), _created(ns)]


def _event(ev: dict[str, Any]) -> Row:
    involved = ev.get("involvedObject") or {}
    last = ev.get("lastTimestamp") or ev.get("eventTime") or ev["metadata"].get("creationTimestamp")
    source = (ev.get("source") or {}).get("component") or ev.get("reportingComponent") or ""
    return [
        _age(last[:19] + "Z" if last and not last.endswith("Z") else last),
        ev.get("type", ""),
        ev.get("reason", ""),
        f"{(involved.get('kind') or '').lower()}/{involved.get('name', '')}",
        ev.get("message", ""),
        involved.get("fieldPath", ""),
        source,
        _age(ev.get("firstTimestamp")),
        ev.get("count", 1),
        ev["metadata"]["name"],
    ]


def _data_count(obj: dict[str, Any]) -> int:
    return len(obj.get("data") or {}) + len(obj.get("binaryData") or obj.get("stringData") or {})


def _quota(q: dict[str, Any]) -> Row:
    hard = (q.get("status") or {}).get("hard") or (q.get("spec") or {}).get("hard") or {}
    used = (q.get("status") or {}).get("used") or {}
    req = [
        f"{k}: {used.get(k, '0')}/{v}"
        for k, v in sorted(hard.items())
        if not k.startswith("limits.")
    ]
    lim = [
        f"{k}: {used.get(k, '0')}/{v}" for k, v in sorted(hard.items()) if k.startswith("limits.")
    ]
    return [q["metadata"]["name"], _created(q), ", ".join(req), ", ".join(lim)]


def _endpoints(ep: dict[str, Any]) -> Row:
    addrs = []
    for subset in ep.get("subsets") or ():
        for a in subset.get("addresses") or ():
            for p in subset.get("ports") or [{}]:
                addrs.append(f"{a.get('ip')}:{p.get('port')}" if p else a.get("ip"))
    shown = ",".join(addrs[:3]) + (f" + {len(addrs) - 3} more..." if len(addrs) > 3 else "")
    return [ep["metadata"]["name"], shown or "<none>", _created(ep)]


def _pvc(pvc: dict[str, Any]) -> Row:
    spec, status = pvc.get("spec") or {}, pvc.get("status") or {}
    capacity = (status.get("capacity") or {}).get("storage", "")
    modes = {
        "ReadWriteOnce": "RWO",
        "ReadOnlyMany": "ROX",
        "ReadWriteMany": "RWX",
        "ReadWriteOncePod": "RWOP",
    }
    access = ",".join(modes.get(m, m) for m in status.get("accessModes") or ())
    return [
        pvc["metadata"]["name"],
        status.get("phase", ""),
        spec.get("volumeName", ""),
        capacity,
        access,
        spec.get("storageClassName") or "<unset>",
        "<unset>",
        _created(pvc),
    ]


def _binding(b: dict[str, Any]) -> Row:
    ref = b.get("roleRef") or {}
    return [b["metadata"]["name"], f"{ref.get('kind', '')}/{ref.get('name', '')}", _created(b)]


_PRINTERS: dict[str, tuple[list[Column], Callable[[dict[str, Any]], Row]]] = {
    "Pod": (
        [
            _NAME,
            ("Ready", "string", 0),
            ("Status", "string", 0),
            ("Restarts", "string", 0),
            _AGE,
            ("IP", "string", 1),
            ("Node", "string", 1),
            ("Nominated Node", "string", 1),
            ("Readiness Gates", "string", 1),
        ],
        _pod,
    ),
    "Deployment": (
        [
            _NAME,
            ("Ready", "string", 0),
            ("Up-to-date", "integer", 0),
            ("Available", "integer", 0),
            _AGE,
            ("Containers", "string", 1),
            ("Images", "string", 1),
            ("Selector", "string", 1),
        ],
        _deployment,
    ),
    "ReplicaSet": (
        [
            _NAME,
            ("Desired", "integer", 0),
            ("Current", "integer", 0),
            ("Ready", "integer", 0),
            _AGE,
            ("Containers", "string", 1),
            ("Images", "string", 1),
            ("Selector", "string", 1),
        ],
        _replicaset,
    ),
    "Job": (
        [
            _NAME,
            ("Status", "string", 0),
            ("Completions", "string", 0),
            ("Duration", "string", 0),
            _AGE,
            ("Containers", "string", 1),
            ("Images", "string", 1),
            ("Selector", "string", 1),
        ],
        _job,
    ),
    "Service": (
        [
            _NAME,
            ("Type", "string", 0),
            ("Cluster-IP", "string", 0),
            ("External-IP", "string", 0),
            ("Port(s)", "string", 0),
            _AGE,
            ("Selector", "string", 1),
        ],
        _service,
    ),
    "Node": (
        [
            _NAME,
            ("Status", "string", 0),
            ("Roles", "string", 0),
            _AGE,
            ("Version", "string", 0),
            ("Internal-IP", "string", 1),
            ("External-IP", "string", 1),
            ("OS-Image", "string", 1),
            ("Kernel-Version", "string", 1),
            ("Container-Runtime", "string", 1),
        ],
        _node,
    ),
    "Namespace": ([_NAME, ("Status", "string", 0), _AGE], _namespace),
    "Event": (
        [
            ("Last Seen", "string", 0),
            ("Type", "string", 0),
            ("Reason", "string", 0),
            ("Object", "string", 0),
            ("Message", "string", 0),
            ("Subobject", "string", 1),
            ("Source", "string", 1),
            ("First Seen", "string", 1),
            ("Count", "string", 1),
            ("Name", "string", 1),
        ],
        _event,
    ),
    "ConfigMap": (
        [_NAME, ("Data", "string", 0), _AGE],
        lambda o: [o["metadata"]["name"], _data_count(o), _created(o)],
    ),
    "Secret": (
        [_NAME, ("Type", "string", 0), ("Data", "string", 0), _AGE],
        lambda o: [o["metadata"]["name"], o.get("type", ""), _data_count(o), _created(o)],
    ),
    "ServiceAccount": (
        [_NAME, ("Secrets", "string", 0), _AGE],
        lambda o: [o["metadata"]["name"], len(o.get("secrets") or ()), _created(o)],
    ),
    "ResourceQuota": ([_NAME, _AGE, ("Request", "string", 0), ("Limit", "string", 0)], _quota),
    "Endpoints": ([_NAME, ("Endpoints", "string", 0), _AGE], _endpoints),
    "PersistentVolumeClaim": (
        [
            _NAME,
            ("Status", "string", 0),
            ("Volume", "string", 0),
            ("Capacity", "string", 0),
            ("Access Modes", "string", 0),
            ("StorageClass", "string", 0),
            ("VolumeAttributesClass", "string", 0),
            _AGE,
        ],
        _pvc,
    ),
    "NetworkPolicy": (
        [_NAME, ("Pod-Selector", "string", 0), _AGE],
        lambda o: [
            o["metadata"]["name"],
            _selector((o.get("spec") or {}).get("podSelector")).replace("<none>", ""),
            _created(o),
        ],
    ),
    "RoleBinding": ([_NAME, ("Role", "string", 0), _AGE], _binding),
    "ClusterRoleBinding": ([_NAME, ("Role", "string", 0), _AGE], _binding),
}

_DEFAULT: tuple[list[Column], Callable[[dict[str, Any]], Row]] = (
    [_NAME, ("Created At", "date", 0)],
    lambda o: [o["metadata"]["name"], o["metadata"].get("creationTimestamp", "")],
)


def _definitions(columns: list[Column]) -> list[dict[str, Any]]:
    return [
        {
            "name": name,
            "type": col_type,
            "format": "name" if name == "Name" else "",
            "description": "",
            "priority": priority,
        }
        for name, col_type, priority in columns
    ]


def _row_object(obj: dict[str, Any], include: str) -> dict[str, Any] | None:
    if include == "None":
        return None
    if include == "Object":
        return obj
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj["metadata"],
    }


def table(
    kind: str,
    objects: list[dict[str, Any]],
    *,
    resource_version: str | None = None,
    continue_token: str | None = None,
    include_object: str = "Metadata",
    headers: bool = True,
) -> dict[str, Any]:
    columns, printer = _PRINTERS.get(kind, _DEFAULT)
    rows = []
    for obj in objects:
        row: dict[str, Any] = {"cells": printer(obj)}
        embedded = _row_object(obj, include_object)
        if embedded is not None:
            row["object"] = embedded
        rows.append(row)
    meta: dict[str, Any] = {}
    if resource_version is not None:
        meta["resourceVersion"] = resource_version
    if continue_token:
        meta["continue"] = continue_token
    out: dict[str, Any] = {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": meta}
    if headers:
        out["columnDefinitions"] = _definitions(columns)
    out["rows"] = rows
    return out
