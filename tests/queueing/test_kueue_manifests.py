"""The Kueue objects of the portal's quotas (tenants/kueue.py): pure, no cluster."""

from __future__ import annotations

from kube.labels import PRIORITY_LABEL, QUEUE_LABEL
from tenants.kueue import (
    BATCH,
    COHORT,
    CPU_FLAVOR,
    INTERACTIVE,
    LOCAL_QUEUE,
    FlavorSpec,
    QueueSpec,
    make_cluster_queue,
    make_local_queue,
    make_priority_classes,
    make_resource_flavors,
    queue_labels,
)

FLAVORS = [FlavorSpec("a100", "nvidia.com/gpu", (("gpu-portal.io/gpu-type", "a100"),)),
           FlavorSpec("a100-mig", "nvidia.com/mig-1g.10gb", (("gpu-portal.io/gpu-type", "a100"),
                                                             ("mig", "on"))),
           FlavorSpec("t4", "nvidia.com/gpu", (("gpu-portal.io/gpu-type", "t4"),))]


def spec(**changes) -> QueueSpec:
    values = dict(name="gp-vision-lab", namespace="gp-vision-lab",
                  gpus=(("a100", 4), ("t4", 2)), cpu=32, memory_gb=128,
                  borrowing_limit=None, lending_limit=None, weight="1")
    values.update(changes)
    return QueueSpec(**values)


def test_a_flavor_per_gpu_type_with_its_node_labels_and_one_for_cpu():
    flavors = {f["metadata"]["name"]: f for f in make_resource_flavors(FLAVORS)}
    assert set(flavors) == {CPU_FLAVOR, "gpu-a100", "gpu-a100-mig", "gpu-t4"}
    assert flavors["gpu-a100-mig"]["spec"]["nodeLabels"] == {"gpu-portal.io/gpu-type": "a100",
                                                              "mig": "on"}
    assert flavors[CPU_FLAVOR]["spec"] == {}


def test_the_cluster_queue_holds_the_quota_per_flavor_in_the_cohort():
    queue = make_cluster_queue(spec(), FLAVORS)
    body = queue["spec"]
    assert body["cohortName"] == COHORT
    assert body["namespaceSelector"] == {
        "matchLabels": {"kubernetes.io/metadata.name": "gp-vision-lab"}}
    cpu_group, gpu_group = body["resourceGroups"]
    assert cpu_group["coveredResources"] == ["cpu", "memory"]
    assert cpu_group["flavors"][0]["resources"] == [{"name": "cpu", "nominalQuota": "32"},
                                                    {"name": "memory", "nominalQuota": "128Gi"}]
    # every GPU flavor lists every GPU resource name, in the group's order
    assert gpu_group["coveredResources"] == ["nvidia.com/gpu", "nvidia.com/mig-1g.10gb"]
    by_flavor = {f["name"]: {r["name"]: r for r in f["resources"]}
                 for f in gpu_group["flavors"]}
    assert [r for r in by_flavor["gpu-a100"]] == gpu_group["coveredResources"]
    assert by_flavor["gpu-a100"]["nvidia.com/gpu"] == {"name": "nvidia.com/gpu",
                                                       "nominalQuota": "4"}
    assert by_flavor["gpu-a100"]["nvidia.com/mig-1g.10gb"]["nominalQuota"] == "0"
    assert by_flavor["gpu-a100-mig"]["nvidia.com/mig-1g.10gb"]["nominalQuota"] == "0"
    assert by_flavor["gpu-t4"]["nvidia.com/gpu"]["nominalQuota"] == "2"
    # owners reclaim what was lent; nobody preempts a colleague; fair sharing by weight
    assert body["preemption"]["reclaimWithinCohort"] == "Any"
    assert body["preemption"]["withinClusterQueue"] == "Never"
    assert body["fairSharing"] == {"weight": "1"}
    assert body["queueingStrategy"] == "StrictFIFO"


def test_borrowing_and_lending_limits_apply_to_each_gpu_flavor():
    queue = make_cluster_queue(spec(borrowing_limit=2, lending_limit=3, weight="2.5"), FLAVORS)
    gpu_group = queue["spec"]["resourceGroups"][1]
    a100 = {r["name"]: r for r in gpu_group["flavors"][0]["resources"]}["nvidia.com/gpu"]
    t4 = {r["name"]: r for r in gpu_group["flavors"][2]["resources"]}["nvidia.com/gpu"]
    assert a100 == {"name": "nvidia.com/gpu", "nominalQuota": "4", "borrowingLimit": "2",
                    "lendingLimit": "3"}
    # it cannot lend more than it has
    assert t4["lendingLimit"] == "2"
    assert queue["spec"]["fairSharing"] == {"weight": "2.5"}


def test_without_gpu_types_only_cpu_and_memory_are_covered():
    queue = make_cluster_queue(spec(gpus=()), [])
    assert [g["coveredResources"] for g in queue["spec"]["resourceGroups"]] == [["cpu",
                                                                                 "memory"]]


def test_the_local_queue_and_the_labels_workloads_carry():
    local = make_local_queue(spec())
    assert local["metadata"] == {"name": LOCAL_QUEUE, "namespace": "gp-vision-lab",
                                 "labels": {"app.kubernetes.io/managed-by": "gpu-portal"}}
    assert local["spec"] == {"clusterQueue": "gp-vision-lab"}
    assert queue_labels("batch") == {QUEUE_LABEL: LOCAL_QUEUE, PRIORITY_LABEL: BATCH}
    assert queue_labels("service") == {QUEUE_LABEL: LOCAL_QUEUE, PRIORITY_LABEL: INTERACTIVE}
    values = {p["metadata"]["name"]: p["value"] for p in make_priority_classes()}
    assert values[INTERACTIVE] > values[BATCH]


def test_a_held_queue_admits_nothing_new():
    """An exhausted hard budget (a hold among the quota's adjustments): Kueue's stopPolicy Hold; otherwise
    Kueue's own default written out, so that lifting a hold is a change the reconcile sees."""
    assert make_cluster_queue(spec(), FLAVORS)["spec"]["stopPolicy"] == "None"
    assert make_cluster_queue(spec(held=True), FLAVORS)["spec"]["stopPolicy"] == "Hold"


A100_DRA = "a100-dra.gpu-portal.io.deviceclass.resource.k8s.io/devices"
H100_DRA = "h100-dra.gpu-portal.io.deviceclass.resource.k8s.io/devices"


def test_kueue_counts_each_dra_types_devices_under_a_resource_of_its_own():
    from pathlib import Path

    from stack.k8s.kueue import configuration
    from tenants.manifests import kueue_dra_resource

    # the real control plane's Kueue maps the classes of the types its DRA pools are for
    # (the partitionable H100s' MIG profiles too): each type's own DeviceClass, each to a
    # resource of its own
    config = configuration(webhook_port=1, health_port=2, cert_dir=Path("/c"))
    assert config["resources"]["deviceClassMappings"] == [
        {"name": f"{name}.gpu-portal.io.deviceclass.resource.k8s.io/devices",
         "deviceClassNames": [f"{name}.gpu-portal.io"]}
        for name in ("a100-dra", "h100-1g-10gb-dra", "h100-3g-40gb-dra", "h100-dra")]
    # a ClusterQueue holds each DRA type's quota under its own name, beside the extended
    # resources: two types of the driver's one class are two quotas
    flavors = [*FLAVORS,
               FlavorSpec("a100-dra", kueue_dra_resource("a100-dra.gpu-portal.io"),
                          (("gputype", "a100-dra"),)),
               FlavorSpec("h100-dra", kueue_dra_resource("h100-dra.gpu-portal.io"),
                          (("gputype", "h100-dra"),))]
    queue = make_cluster_queue(spec(gpus=(("a100", 4), ("a100-dra", 2), ("h100-dra", 1))),
                               flavors)
    gpus = queue["spec"]["resourceGroups"][1]
    assert {A100_DRA, H100_DRA} <= set(gpus["coveredResources"])
    quotas = {f["name"]: {r["name"]: r["nominalQuota"] for r in f["resources"]}
              for f in gpus["flavors"]}
    assert quotas["gpu-a100-dra"] == {"nvidia.com/gpu": "0", "nvidia.com/mig-1g.10gb": "0",
                                      A100_DRA: "2", H100_DRA: "0"}
    assert quotas["gpu-h100-dra"] == {"nvidia.com/gpu": "0", "nvidia.com/mig-1g.10gb": "0",
                                      A100_DRA: "0", H100_DRA: "1"}


def test_a_dra_types_flavor_takes_the_mapped_resource(db):
    from tenants.queueing import flavor_specs
    from tests.support.database import dra_gpu_type

    dra_gpu_type()
    (flavor,) = [f for f in flavor_specs() if f.slug == "a100-dra"]
    assert flavor == FlavorSpec("a100-dra", A100_DRA, (("gputype", "a100-dra"),))
