"""The scheduler: binds Pending pods to nodes, or explains in the real wording why it cannot.

The filter logic is pure (`NodeState`, `filter_node`, `unschedulable_message`) and follows
kube-scheduler's default profile: per node the filters run in the order NodeUnschedulable,
TaintToleration, NodeAffinity, NodeResourcesFit and the first one that fails decides the
node's reasons. NodeResourcesFit reports every insufficient resource, so the counts in the
message may add up to more than the number of nodes, as in the real message.

The runtime part (`Scheduler`) keeps per-node usage current from store events, so a
scheduling decision costs O(nodes), not O(pods).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from kubesim.quantity import parse as qparse
from kubesim.resources import Obj, by_kind

if TYPE_CHECKING:
    from kubesim.cluster import Cluster

log = logging.getLogger(__name__)

POD = by_kind("Pod")
SCHEDULER_NAME = "default-scheduler"
REASON_UNSCHEDULABLE = "node(s) were unschedulable"
REASON_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
REASON_TOO_MANY_PODS = "Too many pods"
PREEMPTION_NO_VICTIMS = "No preemption victims found for incoming pod"
PREEMPTION_NOT_HELPFUL = "Preemption is not helpful for scheduling"

# Resources NodeResourcesFit always checks; any other requested resource is "extended".
_BASIC = ("cpu", "memory", "ephemeral-storage")


# --- pod requests ---------------------------------------------------------------------------


def container_requests(container: Obj) -> dict[str, Decimal]:
    """A container's effective requests: a resource with only a limit requests its limit.

    (The API server defaults requests from limits; for extended resources such as
    nvidia.com/gpu requests must equal limits, so users often give only the limit.)
    """
    resources = container.get("resources") or {}
    limits = resources.get("limits") or {}
    requests = resources.get("requests") or {}
    out: dict[str, Decimal] = {}
    for name in set(limits) | set(requests):
        raw = requests.get(name, limits.get(name))
        try:
            value = qparse(raw)
        except ValueError:
            continue
        if value:
            out[name] = value
    return out


def pod_requests(pod: Obj) -> dict[str, Decimal]:
    """What a pod asks of a node: sum over containers, at least the largest init container."""
    spec = pod.get("spec") or {}
    total: dict[str, Decimal] = {}
    for container in spec.get("containers") or []:
        for name, value in container_requests(container).items():
            total[name] = total.get(name, Decimal(0)) + value
    for container in spec.get("initContainers") or []:
        for name, value in container_requests(container).items():
            if value > total.get(name, Decimal(0)):
                total[name] = value
    for name, value in (spec.get("overhead") or {}).items():
        total[name] = total.get(name, Decimal(0)) + qparse(value)
    return total


def device_wants(pod: Obj) -> dict[str, list[tuple[str, int]]]:
    """Per NVIDIA resource, the (container, count) pairs the device plugin must serve."""
    wants: dict[str, list[tuple[str, int]]] = {}
    for container in (pod.get("spec") or {}).get("containers") or []:
        for name, value in container_requests(container).items():
            if name.startswith("nvidia.com/") and value > 0:
                wants.setdefault(name, []).append((container.get("name", ""), int(value)))
    return wants


# --- node matching --------------------------------------------------------------------------


def tolerates(tolerations: Iterable[Obj], taint: Obj) -> bool:
    for tol in tolerations:
        effect = tol.get("effect") or ""
        if effect and effect != taint.get("effect"):
            continue
        key = tol.get("key") or ""
        operator = tol.get("operator") or "Equal"
        if operator == "Exists":
            if not key or key == taint.get("key"):
                return True
        elif key == taint.get("key") and (tol.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def _expression_matches(expr: Obj, labels: dict[str, str]) -> bool:
    key = expr.get("key", "")
    op = expr.get("operator", "")
    values = expr.get("values") or []
    present = key in labels
    if op == "In":
        return present and labels[key] in values
    if op == "NotIn":
        return not present or labels[key] not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt") and present and values:
        try:
            have, want = int(labels[key]), int(values[0])
        except ValueError:
            return False
        return have > want if op == "Gt" else have < want
    return False


def _term_matches(term: Obj, labels: dict[str, str], node_name: str) -> bool:
    exprs = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not exprs and not fields:
        return False  # an empty term matches no objects
    if not all(_expression_matches(e, labels) for e in exprs):
        return False
    return all(_expression_matches(f, {"metadata.name": node_name}) for f in fields)


def affinity_matches(pod: Obj, labels: dict[str, str], node_name: str) -> bool:
    """nodeSelector AND required node affinity (its terms ORed)."""
    spec = pod.get("spec") or {}
    for key, value in (spec.get("nodeSelector") or {}).items():
        if labels.get(key) != value:
            return False
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution"))
    if required:
        terms = required.get("nodeSelectorTerms") or []
        if not any(_term_matches(t, labels, node_name) for t in terms):
            return False
    return True


@dataclass
class NodeState:
    """What the scheduler knows about one node: its spec and the sum of its pods' requests."""

    name: str
    labels: dict[str, str]
    taints: list[Obj]
    unschedulable: bool
    allocatable: dict[str, Decimal]
    requested: dict[str, Decimal] = field(default_factory=dict)
    pod_count: int = 0

    @classmethod
    def from_node(cls, node: Obj) -> NodeState:
        meta = node.get("metadata") or {}
        spec = node.get("spec") or {}
        alloc = {}
        for name, value in ((node.get("status") or {}).get("allocatable") or {}).items():
            try:
                alloc[name] = qparse(value)
            except ValueError:
                pass
        return cls(
            name=meta.get("name", ""),
            labels=dict(meta.get("labels") or {}),
            taints=list(spec.get("taints") or []),
            unschedulable=bool(spec.get("unschedulable")),
            allocatable=alloc,
        )

    def add(self, requests: dict[str, Decimal], sign: int = 1) -> None:
        for name, value in requests.items():
            self.requested[name] = self.requested.get(name, Decimal(0)) + sign * value
        self.pod_count += sign

    def free(self, resource: str) -> Decimal:
        return self.allocatable.get(resource, Decimal(0)) - self.requested.get(resource, Decimal(0))


def taint_reason(taint: Obj, *, new_wording: bool = False) -> str:
    if new_wording:
        return "node(s) had untolerated taint(s)"
    return f"node(s) had untolerated taint {{{taint.get('key', '')}: {taint.get('value', '')}}}"


@dataclass
class FilterResult:
    reasons: list[str]
    resolvable: bool  # True: evicting lower-priority pods could help (resources); False: never


def filter_node(pod: Obj, requests: dict[str, Decimal], node: NodeState, *,
                new_taint_wording: bool = False) -> FilterResult | None:
    """None when the pod fits the node, else why not (the first failing filter's reasons)."""
    spec = pod.get("spec") or {}
    tolerations = spec.get("tolerations") or []
    if node.unschedulable and not tolerates(
        tolerations, {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
    ):
        return FilterResult([REASON_UNSCHEDULABLE], False)
    for taint in node.taints:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(tolerations, taint):
            return FilterResult([taint_reason(taint, new_wording=new_taint_wording)], False)
    if not affinity_matches(pod, node.labels, node.name):
        return FilterResult([REASON_AFFINITY], False)
    reasons = []
    resolvable = True
    if node.pod_count + 1 > node.allocatable.get("pods", Decimal(110)):
        reasons.append(REASON_TOO_MANY_PODS)
    for name in sorted(requests, key=lambda n: (n not in _BASIC, _BASIC.index(n) if n in _BASIC else 0, n)):
        value = requests[name]
        if name == "pods" or value <= 0:
            continue
        if value > node.free(name):
            reasons.append(f"Insufficient {name}")
            # more than the node has at all: no eviction can make room
            if value > node.allocatable.get(name, Decimal(0)):
                resolvable = False
    if reasons:
        return FilterResult(reasons, resolvable)
    return None


def _count_summary(counts: dict[str, int]) -> str:
    return ", ".join(sorted(f"{n} {reason}" for reason, n in counts.items()))


def unschedulable_message(total_nodes: int, results: Iterable[FilterResult]) -> str:
    """`0/N nodes are available: <counts>. preemption: 0/N nodes are available: <counts>.`"""
    if total_nodes == 0:
        return "no nodes available to schedule pods"
    reasons: dict[str, int] = {}
    preemption: dict[str, int] = {}
    for result in results:
        for reason in result.reasons:
            reasons[reason] = reasons.get(reason, 0) + 1
        key = PREEMPTION_NO_VICTIMS if result.resolvable else PREEMPTION_NOT_HELPFUL
        preemption[key] = preemption.get(key, 0) + 1
    return (f"0/{total_nodes} nodes are available: {_count_summary(reasons)}. "
            f"preemption: 0/{total_nodes} nodes are available: {_count_summary(preemption)}.")


def pick_node(candidates: list[NodeState], requests: dict[str, Decimal]) -> NodeState:
    """Among fitting nodes, prefer the most requested GPU-wise, least requested otherwise.

    Packing GPU pods onto already busy GPU nodes keeps whole nodes free for large jobs (what
    clusters configure with MostAllocated scoring for nvidia.com/gpu); CPU pods spread.
    Ties break on the name so that results are deterministic.
    """
    gpu_resources = [r for r in requests if r.startswith("nvidia.com/")]
    if gpu_resources:
        return min(candidates, key=lambda n: (sum(n.free(r) for r in gpu_resources), n.name))
    return min(candidates, key=lambda n: (n.pod_count, n.name))


def is_terminal(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def pod_key(pod: Obj) -> tuple[str, str]:
    meta = pod.get("metadata") or {}
    return meta.get("namespace", ""), meta.get("name", "")


def wants_scheduling(pod: Obj) -> bool:
    spec = pod.get("spec") or {}
    meta = pod.get("metadata") or {}
    return (not spec.get("nodeName") and not meta.get("deletionTimestamp")
            and spec.get("schedulerName", SCHEDULER_NAME) == SCHEDULER_NAME
            and not is_terminal(pod))


# --- runtime ------------------------------------------------------------------------------------


class Scheduler:
    """Binds pods as they appear; retries the unschedulable ones when capacity may have freed."""

    def __init__(self, cluster: Cluster, *, new_taint_wording: bool = False):
        self.cluster = cluster
        self.nodes: dict[str, NodeState] = {}
        # pod key -> (node, requests) for every pod that holds node resources
        self.accounted: dict[tuple[str, str], tuple[str, dict[str, Decimal]]] = {}
        self.unschedulable: set[tuple[str, str]] = set()
        self.last_message: dict[tuple[str, str], str] = {}
        self.generations: dict[tuple[str, str], int] = {}  # spec generation last scheduled
        self.new_taint_wording = new_taint_wording
        self.queue = cluster.make_queue("scheduler", self.schedule)

    # Listener side: keep the node table current and queue work; never writes.
    def on_node(self, event: str, node: Obj) -> None:
        name = (node.get("metadata") or {}).get("name", "")
        if event == "DELETED":
            self.nodes.pop(name, None)
        else:
            state = NodeState.from_node(node)
            old = self.nodes.get(name)
            if old is not None:
                state.requested, state.pod_count = old.requested, old.pod_count
            self.nodes[name] = state
        self.retry_unschedulable()

    def on_pod(self, event: str, pod: Obj) -> None:
        key = pod_key(pod)
        holds = (event != "DELETED" and (pod.get("spec") or {}).get("nodeName")
                 and not is_terminal(pod))
        had = self.accounted.get(key)
        if holds and had is None:
            node = pod["spec"]["nodeName"]
            requests = pod_requests(pod)
            self.accounted[key] = (node, requests)
            if node in self.nodes:
                self.nodes[node].add(requests)
        elif not holds and had is not None:
            del self.accounted[key]
            if had[0] in self.nodes:
                self.nodes[had[0]].add(had[1], -1)
            self.retry_unschedulable()
        if event == "DELETED":
            self.unschedulable.discard(key)
            self.last_message.pop(key, None)
            self.generations.pop(key, None)
            self.queue.forget(key)
        elif wants_scheduling(pod):
            generation = pod["metadata"].get("generation", 0)
            if key not in self.unschedulable or self.generations.get(key) != generation:
                # New, or its spec changed (e.g. tolerations added): look again. Our own
                # status writes on unschedulable pods do not bring them back.
                self.generations[key] = generation
                self.queue.add_after(key, self.cluster.config.schedule_delay)
        else:
            self.generations.pop(key, None)

    def retry_unschedulable(self) -> None:
        for key in self.unschedulable:
            self.queue.add(key)

    # Worker side.
    def schedule(self, key: tuple[str, str]) -> None:
        pod = self.cluster.peek(POD, *key)
        if pod is None or not wants_scheduling(pod):
            self.unschedulable.discard(key)
            return
        requests = pod_requests(pod)
        fits: list[NodeState] = []
        failures: list[FilterResult] = []
        for node in self.nodes.values():
            result = filter_node(pod, requests, node, new_taint_wording=self.new_taint_wording)
            if result is None:
                fits.append(node)
            else:
                failures.append(result)
        if not fits:
            self.unschedulable.add(key)
            self._report_unschedulable(pod, unschedulable_message(len(self.nodes), failures))
            return
        node = pick_node(fits, requests)
        if self.cluster.bind(pod, node.name):
            self.unschedulable.discard(key)
            self.last_message.pop(key, None)

    def _report_unschedulable(self, pod: Obj, message: str) -> None:
        key = pod_key(pod)
        if self.last_message.get(key) == message:
            return  # same answer as last time: no new event, no status write
        self.last_message[key] = message
        self.cluster.set_pod_condition(pod, {
            "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
            "message": message,
        })
        self.cluster.record_event(pod, "Warning", "FailedScheduling", message, SCHEDULER_NAME)

    def snapshot(self) -> dict[str, Any]:
        return {name: {"requested": {k: str(v) for k, v in n.requested.items()},
                       "pods": n.pod_count} for name, n in self.nodes.items()}
