"""Unit tests of the cluster half's pure parts: scheduler filters and messages, quota
arithmetic and messages, quantities, inventory parsing, GPU traces, pools, hashes, logs."""

from __future__ import annotations

from decimal import Decimal

import pytest

from kubesim import gpus, podlogs
from kubesim.controllers.deployments import max_unavailable, template_hash
from kubesim.controllers.endpoints import build_subsets
from kubesim.controllers.loadbalancer import AddressPool
from kubesim.inventory import (
    InventoryError,
    load_inventory,
    node_devices,
    node_labels,
    node_object,
    parse_inventory,
    resource_counts,
)
from kubesim.kubelet import normalize_image
from kubesim.quantity import Quantity, format_quantity
from kubesim.quota import apply_limit_ranges, exceeded_message, missing_constraints, pod_usage
from kubesim.scheduler import (
    FilterResult,
    NodeState,
    affinity_matches,
    filter_node,
    pod_requests,
    taint_reason,
    tolerates,
    unschedulable_message,
)
from tests.kubesim.cluster_helpers import DEMO_INVENTORY, MIG_INVENTORY

GPU_TAINT = {"key": "nvidia.com/gpu", "effect": "NoSchedule"}


def node(name: str, *, gpus_: int = 0, labels: dict | None = None, taints: list | None = None,
         unschedulable: bool = False, pods: int = 110) -> NodeState:
    alloc = {"cpu": Decimal(8), "memory": Decimal(32 * 2**30), "pods": Decimal(pods)}
    if gpus_:
        alloc["nvidia.com/gpu"] = Decimal(gpus_)
    return NodeState(name, labels or {}, taints or [], unschedulable, alloc)


def gpu_pod(n: int = 1, *, tolerate: bool = True, selector: dict | None = None) -> dict:
    spec: dict = {"containers": [{"name": "app", "resources": {"limits": {"nvidia.com/gpu": str(n)}}}]}
    if tolerate:
        spec["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists"}]
    if selector:
        spec["nodeSelector"] = selector
    return {"spec": spec}


# --- scheduler -------------------------------------------------------------------------------


def test_facts_example_message():
    """The recorded example, reproduced from node results."""
    results = [FilterResult(["Insufficient nvidia.com/gpu"], True)] * 3 + [
        FilterResult(["node(s) didn't match Pod's node affinity/selector"], False)] * 4
    assert unschedulable_message(7, results) == (
        "0/7 nodes are available: 3 Insufficient nvidia.com/gpu, 4 node(s) didn't match Pod's "
        "node affinity/selector. preemption: 0/7 nodes are available: 3 No preemption victims "
        "found for incoming pod, 4 Preemption is not helpful for scheduling.")


def test_reasons_sort_as_strings_with_their_counts():
    results = ([FilterResult(["Insufficient cpu"], True)] * 10
               + [FilterResult(["Insufficient nvidia.com/gpu"], True)] * 2)
    # "10 Insufficient cpu" < "2 Insufficient nvidia.com/gpu" as strings, like kube-scheduler.
    assert unschedulable_message(12, results).startswith(
        "0/12 nodes are available: 10 Insufficient cpu, 2 Insufficient nvidia.com/gpu. ")
    assert unschedulable_message(0, []) == "no nodes available to schedule pods"


def test_filter_order_and_reasons():
    pod = gpu_pod(2, tolerate=False)
    assert filter_node(pod, pod_requests(pod), node("c", unschedulable=True)).reasons == [
        "node(s) were unschedulable"]
    assert filter_node(pod, pod_requests(pod), node("g", gpus_=8, taints=[GPU_TAINT])).reasons == [
        "node(s) had untolerated taint {nvidia.com/gpu: }"]
    tolerated = gpu_pod(2, selector={"gputype": "a100"})
    assert filter_node(tolerated, pod_requests(tolerated), node("v", gpus_=4)).reasons == [
        "node(s) didn't match Pod's node affinity/selector"]
    busy = node("a", gpus_=2, labels={"gputype": "a100"}, pods=1)
    busy.add({"cpu": Decimal(1), "nvidia.com/gpu": Decimal(1)})
    result = filter_node(tolerated, pod_requests(tolerated), busy)
    assert result.reasons == ["Too many pods", "Insufficient nvidia.com/gpu"] and result.resolvable
    # asking for more than the node has at all: evicting pods could not help
    small = node("s", gpus_=1, labels={"gputype": "a100"})
    result = filter_node(tolerated, pod_requests(tolerated), small)
    assert result.reasons == ["Insufficient nvidia.com/gpu"] and not result.resolvable
    assert filter_node(tolerated, pod_requests(tolerated),
                       node("ok", gpus_=2, labels={"gputype": "a100"})) is None
    assert taint_reason({"key": "k", "value": "v"}) == "node(s) had untolerated taint {k: v}"
    assert taint_reason({"key": "k"}, new_wording=True) == "node(s) had untolerated taint(s)"


def test_requests_count_limits_and_init_containers():
    pod = {"spec": {
        "containers": [
            {"name": "a", "resources": {"requests": {"cpu": "500m"}, "limits": {"nvidia.com/gpu": 1}}},
            {"name": "b", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}},
        ],
        "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "2"}}}],
    }}
    assert pod_requests(pod) == {"cpu": Decimal(2), "memory": Decimal(2**30),
                                 "nvidia.com/gpu": Decimal(1)}


@pytest.mark.parametrize(("tolerations", "taint", "expected"), [
    ([{"key": "nvidia.com/gpu", "operator": "Exists"}], GPU_TAINT, True),
    ([{"operator": "Exists"}], GPU_TAINT, True),
    ([{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}], GPU_TAINT, False),
    ([{"key": "k", "operator": "Equal", "value": "v"}], {"key": "k", "value": "v",
                                                         "effect": "NoSchedule"}, True),
    ([{"key": "k", "value": "w"}], {"key": "k", "value": "v", "effect": "NoSchedule"}, False),
    ([], GPU_TAINT, False),
])
def test_tolerations(tolerations, taint, expected):
    assert tolerates(tolerations, taint) is expected


@pytest.mark.parametrize(("expr", "expected"), [
    ({"key": "gputype", "operator": "In", "values": ["a100", "v100"]}, True),
    ({"key": "gputype", "operator": "NotIn", "values": ["a100"]}, False),
    ({"key": "gputype", "operator": "Exists"}, True),
    ({"key": "gputype", "operator": "DoesNotExist"}, False),
    ({"key": "nvidia.com/gpu.count", "operator": "Gt", "values": ["4"]}, True),
    ({"key": "nvidia.com/gpu.count", "operator": "Lt", "values": ["4"]}, False),
])
def test_node_affinity_operators(expr, expected):
    pod = {"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [expr]}]}}}}}
    assert affinity_matches(pod, {"gputype": "a100", "nvidia.com/gpu.count": "8"}, "n") is expected


# --- quota ----------------------------------------------------------------------------------


def test_quota_message_names_only_exceeded_resources_sorted():
    requested = {"requests.nvidia.com/gpu": Quantity.parse("1"), "pods": Quantity(1),
                 "requests.cpu": Quantity.parse("500m")}
    used = {"requests.nvidia.com/gpu": Quantity.parse("3"), "pods": Quantity(1),
            "requests.cpu": Quantity.parse("3500m")}
    hard = {"requests.nvidia.com/gpu": Quantity.parse("4"), "pods": Quantity(10),
            "requests.cpu": Quantity.parse("4")}
    assert exceeded_message("gpu-quota", requested, used, hard) is None
    requested["requests.cpu"] = Quantity.parse("600m")
    requested["requests.nvidia.com/gpu"] = Quantity.parse("2")
    assert exceeded_message("gpu-quota", requested, used, hard) == (
        "exceeded quota: gpu-quota, requested: requests.cpu=600m,requests.nvidia.com/gpu=2, "
        "used: requests.cpu=3500m,requests.nvidia.com/gpu=3, "
        "limited: requests.cpu=4,requests.nvidia.com/gpu=4")


def test_pod_usage_and_constraints():
    pod = {"spec": {"containers": [{"name": "app", "resources": {
        "requests": {"cpu": "250m", "memory": "512Mi", "nvidia.com/gpu": "2"},
        "limits": {"cpu": "1", "nvidia.com/gpu": "2"}}}]}, "status": {"phase": "Running"}}
    usage = {k: str(v) for k, v in pod_usage(pod).items()}
    assert usage == {"pods": "1", "count/pods": "1", "cpu": "250m", "requests.cpu": "250m",
                     "memory": "512Mi", "requests.memory": "512Mi",
                     "requests.nvidia.com/gpu": "2", "limits.cpu": "1"}
    assert pod_usage({**pod, "status": {"phase": "Succeeded"}}) == {"count/pods": Quantity(1)}
    assert missing_constraints(pod, {"limits.memory", "requests.cpu", "pods"}) == (
        "must specify limits.memory for: app")


def test_limit_range_defaults():
    pod = {"spec": {"containers": [{"name": "a"}, {"name": "b", "resources": {
        "limits": {"cpu": "2"}, "requests": {"cpu": "2"}}}]}}
    apply_limit_ranges(pod, [{"spec": {"limits": [{"type": "Container",
                                                   "default": {"cpu": "1", "memory": "1Gi"}}]}}])
    a, b = pod["spec"]["containers"]
    assert a["resources"] == {"limits": {"cpu": "1", "memory": "1Gi"},
                              "requests": {"cpu": "1", "memory": "1Gi"}}
    assert b["resources"] == {"limits": {"cpu": "2", "memory": "1Gi"},
                              "requests": {"cpu": "2", "memory": "1Gi"}}


@pytest.mark.parametrize(("text", "canonical"), [
    ("500m", "500m"), ("1", "1"), ("1000m", "1"), ("2Gi", "2Gi"), ("1.5Gi", "1536Mi"),
    ("1e3", "1k"), ("1500", "1500"), ("0.5", "500m"), ("128974848", "128974848"), ("0", "0"),
])
def test_quantities(text, canonical):
    assert str(Quantity.parse(text)) == canonical


def test_quantity_sums_keep_their_format():
    assert str(Quantity.parse("512Mi") + Quantity.parse("512Mi")) == "1Gi"
    assert str(Quantity.parse("500m") + Quantity.parse("500m")) == "1"
    assert str(Quantity(0) + Quantity.parse("1Gi")) == "1Gi"
    assert format_quantity(Decimal("0.25")) == "250m"


# --- inventory ------------------------------------------------------------------------------


def test_demo_inventory_matches_the_design():
    inv = load_inventory(str(DEMO_INVENTORY))
    by_type: dict[str, list] = {}
    for spec in inv.nodes:
        by_type.setdefault(spec.labels.get("gputype", "cpu"), []).append(spec)
    assert {k: len(v) for k, v in by_type.items()} == {
        "a100": 2, "v100": 2, "t4": 1, "t4-shared": 1, "a100-mig": 1, "cpu": 2}
    assert [resource_counts(s) for s in by_type["a100"]] == [{"nvidia.com/gpu": 8}] * 2
    assert [resource_counts(s) for s in by_type["v100"]] == [{"nvidia.com/gpu": 4}] * 2
    assert resource_counts(by_type["t4"][0]) == {"nvidia.com/gpu": 4}
    # 4 T4s time-sliced four ways, renamed as the device plugin does; 2 A100s in 7 slices each
    assert resource_counts(by_type["t4-shared"][0]) == {"nvidia.com/gpu.shared": 16}
    assert resource_counts(by_type["a100-mig"][0]) == {"nvidia.com/mig-1g.10gb": 14}
    assert all(not resource_counts(s) and not s.taints for s in by_type["cpu"])
    for spec in inv.nodes:
        if spec.gpu_model is not None:
            assert spec.taints == [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]
    assert "default" in inv.address_pools
    a100 = node_object(by_type["a100"][0], inv, "2024-01-01T00:00:00Z")
    labels = a100["metadata"]["labels"]
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB"
    assert labels["nvidia.com/gpu.memory"] == "81920"
    assert labels["nvidia.com/gpu.count"] == "8" and labels["nvidia.com/gpu.family"] == "ampere"
    assert labels["kubernetes.io/hostname"] == a100["metadata"]["name"]
    assert a100["status"]["capacity"]["nvidia.com/gpu"] == "8"
    assert a100["status"]["capacity"]["pods"] == "110"
    assert [c["type"] for c in a100["status"]["conditions"]] == [
        "MemoryPressure", "DiskPressure", "PIDPressure", "Ready"]
    info = a100["status"]["nodeInfo"]
    assert info["kubeletVersion"].startswith("v1.") and info["architecture"] == "amd64"
    assert {a["type"] for a in a100["status"]["addresses"]} == {"InternalIP", "Hostname"}
    t4 = node_object(by_type["t4"][0], inv, "now")["metadata"]["labels"]
    assert t4["nvidia.com/gpu.product"] == "Tesla-T4" and t4["nvidia.com/gpu.family"] == "turing"


def test_time_sliced_node_as_the_device_plugin_and_feature_discovery_publish_it():
    inv = parse_inventory({"nodePools": [{"name": "ts", "gpu": {
        "model": "T4", "count": 2, "sharing": {"replicas": 4}}}, {"name": "plain", "gpu": {
            "model": "T4", "count": 1, "sharing": {"strategy": "mps", "replicas": 2,
                                                   "renamed": False}}}]})
    renamed, plain = inv.nodes
    assert resource_counts(renamed) == {"nvidia.com/gpu.shared": 8}
    assert resource_counts(plain) == {"nvidia.com/gpu": 2}
    labels = node_labels(renamed)
    assert labels["nvidia.com/gpu.replicas"] == "4"
    assert labels["nvidia.com/gpu.sharing-strategy"] == "time-slicing"
    assert labels["nvidia.com/gpu.product"] == "Tesla-T4"
    # the resource keeps its name: the product label tells the shared nodes apart
    assert node_labels(plain)["nvidia.com/gpu.product"] == "Tesla-T4-SHARED"
    devices = node_devices(renamed)
    assert len(devices) == 8 and {d.index for d in devices} == {0, 1}
    assert devices[1].device_id == devices[0].uuid + "::1"
    node = node_object(renamed, inv, "now")
    assert node["status"]["allocatable"]["nvidia.com/gpu.shared"] == "8"
    with pytest.raises(InventoryError, match="replicas"):
        parse_inventory({"nodePools": [{"gpu": {"model": "T4", "sharing": {"replicas": 1}}}]})
    with pytest.raises(InventoryError, match="mig or sharing"):
        parse_inventory({"nodePools": [{"gpu": {"model": "A100-SXM4-80GB", "sharing": {
            "replicas": 2}, "mig": {"layout": {"1g.10gb": 7}}}}]})


def test_demo_mig_node_names_its_layout():
    inv = load_inventory(str(DEMO_INVENTORY))
    (mig,) = [spec for spec in inv.nodes if spec.labels.get("gputype") == "a100-mig"]
    labels = node_labels(mig)
    assert labels["nvidia.com/mig.config"] == "all-1g.10gb"
    assert labels["nvidia.com/mig.strategy"] == "mixed"
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB"


def test_mig_inventory():
    inv = load_inventory(str(MIG_INVENTORY))
    mig = inv.nodes[0]
    assert resource_counts(mig) == {"nvidia.com/mig-1g.10gb": 7, "nvidia.com/mig-3g.40gb": 1,
                                    "nvidia.com/mig-2g.20gb": 2}
    devices = node_devices(mig)
    assert len(devices) == 10 and {d.index for d in devices} == {0, 1}
    assert all(d.device_id.startswith("MIG-") for d in devices)
    single = parse_inventory({"nodePools": [{"name": "s", "gpu": {
        "model": "A100-SXM4-80GB", "count": 2, "mig": {"strategy": "single",
                                                       "layout": {"1g.10gb": 7}}}}]}).nodes[0]
    assert resource_counts(single) == {"nvidia.com/gpu": 14}
    labels = node_object(single, inv, "now")["metadata"]["labels"]
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb"


@pytest.mark.parametrize(("data", "message"), [
    ({"nodePools": [{"name": "x", "gpu": {"model": "Z9000", "count": 1}}]}, "unknown GPU model"),
    ({"nodePools": [{"name": "x", "count": "two"}]}, "nodePools[x].count"),
    ({"nodePools": [{"name": "x", "taints": ["nvidia.com/gpu"]}]}, "needs an effect"),
    ({"nodePools": [{"name": "x", "gpu": {"model": "T4", "mig": {"layout": {"1g.5gb": 1}}}}]},
     "does not support MIG"),
    ({"nodePools": [{"name": "x", "gpu": {"model": "A100-SXM4-80GB", "mig": {
        "layout": {"4g.40gb": 2}}}}]}, "needs 8 compute slices"),
    ({"nodePools": [{"name": "x"}, {"name": "y", "namePrefix": "x-"}]}, "used twice"),
])
def test_inventory_errors_name_the_field(data, message):
    with pytest.raises(InventoryError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_inventory(data)


# --- GPUs, traces, pools, hashes ---------------------------------------------------------------


def test_traces_are_deterministic_per_seed_and_idle_is_idle():
    a = [gpus.trace_util("busy", 7, "GPU-x", step) for step in range(50)]
    assert a == [gpus.trace_util("busy", 7, "GPU-x", step) for step in range(50)]
    assert a != [gpus.trace_util("busy", 8, "GPU-x", step) for step in range(50)]
    assert all(v < 2 for v in (gpus.trace_util("idle", s, "GPU-y", k)
                               for s in range(3) for k in range(200)))
    assert sum(a) / len(a) > 70
    ramp = [gpus.trace_util("ramp", 1, "GPU-z", step) for step in (0, 15, 40)]
    assert ramp[0] < ramp[1] < ramp[2]
    bursty = [gpus.trace_util("bursty", 1, "GPU-b", step) for step in range(200)]
    assert min(bursty) < 10 and max(bursty) > 75


def test_uuid_stable_per_node_and_index():
    assert gpus.stable_uuid("n1", 0) == gpus.stable_uuid("n1", 0)
    assert gpus.stable_uuid("n1", 0) != gpus.stable_uuid("n1", 1)


def test_registry_allocates_lowest_free_and_skips_unhealthy():
    model = gpus.lookup_model("T4")
    registry = gpus.GpuRegistry()
    registry.add_node("n", [gpus.Device("n", i, f"GPU-{i}", "nvidia.com/gpu", model, 15360)
                            for i in range(4)])
    registry.by_node["n"][0].xid = 79
    registry.by_node["n"][1].xid = 13  # an application XID: still healthy
    got = registry.allocate("n", "ns", "p", {"nvidia.com/gpu": [("app", 2)]}, "busy", 0.0)
    assert [d.index for d in got] == [1, 2]
    assert registry.free_count("n", "nvidia.com/gpu") == 1
    assert registry.release("ns", "p") and registry.free_count("n", "nvidia.com/gpu") == 3


def test_address_pools():
    pool = AddressPool("p", ["192.168.1.240-192.168.1.242", "10.0.0.0/31", "172.16.0.9"])
    assert list(pool.addresses()) == ["192.168.1.240", "192.168.1.241", "192.168.1.242",
                                      "10.0.0.0", "10.0.0.1", "172.16.0.9"]
    assert pool.size() == 6 and pool.contains("10.0.0.1") and not pool.contains("10.0.0.2")


def test_template_hash_and_max_unavailable():
    template = {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "a"}]}}
    h = template_hash(template)
    assert h == template_hash(dict(template)) and h != template_hash(template, 1)
    assert set(h) <= set("bcdfghjklmnpqrstvwxz2456789")
    assert max_unavailable({"spec": {"replicas": 4}}) == 1
    assert max_unavailable({"spec": {"replicas": 1}}) == 0
    assert max_unavailable({"spec": {"replicas": 4, "strategy": {"type": "Recreate"}}}) == 0


def test_endpoints_subsets_split_ready_and_not_ready():
    service = {"spec": {"ports": [{"name": "http", "port": 80, "targetPort": "web"}]}}

    def p(name, ip, ready):
        return {"metadata": {"name": name, "namespace": "ns", "uid": name},
                "spec": {"nodeName": "n", "containers": [{"ports": [{"name": "web",
                                                                     "containerPort": 8080}]}]},
                "status": {"podIP": ip, "conditions": [{"type": "Ready",
                                                        "status": "True" if ready else "False"}]}}

    subsets = build_subsets(service, [p("a", "10.0.0.1", True), p("b", "10.0.0.2", False)])
    assert subsets == [{"ports": [{"port": 8080, "protocol": "TCP", "name": "http"}],
                        "addresses": [{"ip": "10.0.0.1", "nodeName": "n", "targetRef": {
                            "kind": "Pod", "namespace": "ns", "name": "a", "uid": "a"}}],
                        "notReadyAddresses": [{"ip": "10.0.0.2", "nodeName": "n", "targetRef": {
                            "kind": "Pod", "namespace": "ns", "name": "b", "uid": "b"}}]}]


def test_image_normalisation():
    assert normalize_image("nginx") == "docker.io/library/nginx:latest"
    assert normalize_image("jupyter/base-notebook:x") == "docker.io/jupyter/base-notebook:x"
    assert normalize_image("quay.io/jupyter/scipy-notebook") == "quay.io/jupyter/scipy-notebook:latest"


def test_logs_are_deterministic_and_show_jupyter_token():
    ctx = podlogs.LogContext("ns", "nb", "uid-1", "app", "jupyter/base-notebook", [],
                             ["--ServerApp.token=abc"], {}, [], 1000.0, False, None)
    first = podlogs.lines_until(ctx, 1001.0)
    assert first == podlogs.lines_until(ctx, 1001.0)
    assert any("lab?token=abc" in text for _, text in first)
    batch = podlogs.LogContext("ns", "j", "uid-2", "app", "busybox", [], [], {}, [], 0.0, True,
                               4.0, exit_code=2)
    done = podlogs.lines_until(batch, 10.0, finished=4.0)
    assert done[-1] == (4.0, "Error: process exited with status 2")
    assert podlogs.next_line_at(batch, 1.0) is not None
