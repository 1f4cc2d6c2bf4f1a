"""A DRA type's capacity from ResourceSlices and ResourceClaims (cluster/devices.py and the
pure parts of cluster/capacity.py): the devices that match its class and selectors, on nodes
that take pods, less those claims' allocations hold."""

from __future__ import annotations

from types import SimpleNamespace

from cluster.capacity import GpuTypeCapacity, devices_in_use, dra_capacity
from cluster.devices import claim_view, device_matches, published_devices, slice_view
from kube.labels import LABEL_WORKLOAD_ID
from stack.k8s.dra import DraPool, resource_slice, resource_slices


def dra_type(slug: str = "a100-dra", *, device_class: str = "gpu.nvidia.com",
             product: str = "NVIDIA A100-SXM4-80GB", memory_gb: int = 80) -> SimpleNamespace:
    return SimpleNamespace(slug=slug, resource_name="nvidia.com/gpu", node_selector={},
                           device_class=device_class, product=product, memory_gb=memory_gb)


A100 = DraPool(count=2, gpus=2)
T4 = DraPool(name="t4", count=1, gpus=4, product="Tesla T4", memory="15360Mi",
             architecture="Turing")


def slices(*pools: DraPool) -> list:
    return [slice_view(resource_slice(pool, node)) for pool in pools
            for node in pool.node_names()]


def node(name: str, *, cordoned: bool = False) -> dict:
    return {"metadata": {"name": name}, "spec": {"unschedulable": True} if cordoned else {}}


def claim(namespace: str, name: str, devices: list[tuple[str, str]],
          workload_id: int | None = None) -> dict:
    labels = {LABEL_WORKLOAD_ID: str(workload_id)} if workload_id is not None else {}
    return {"metadata": {"namespace": namespace, "name": name, "labels": labels},
            "status": {"allocation": {"devices": {"results": [
                {"request": "gpu", "driver": "gpu.nvidia.com", "pool": pool, "device": device}
                for pool, device in devices]}}}}


def test_a_slice_is_read_as_the_driver_publishes_it():
    (view,) = slices(DraPool())
    assert [(d.node, d.pool, d.name, d.type, d.product, d.memory) for d in view.devices] == [
        ("gpu-a100-dra-1", "gpu-a100-dra-1", f"gpu-{i}", "gpu", "NVIDIA A100-SXM4-80GB",
         80 * 2**30) for i in range(2)]


def test_devices_match_by_class_product_and_decimal_memory():
    (t4,) = published_devices(slices(T4))[:1]
    assert device_matches(dra_type(product="Tesla T4", memory_gb=16), t4)  # 15360Mi > 16 GB
    assert not device_matches(dra_type(product="Tesla T4", memory_gb=17), t4)
    assert not device_matches(dra_type(product="NVIDIA A100-SXM4-80GB", memory_gb=0), t4)
    assert device_matches(dra_type(product="", memory_gb=0), t4)  # any GPU
    assert not device_matches(dra_type(device_class="mig.nvidia.com", product=""), t4)


def test_capacity_is_the_matching_devices_less_the_allocated_ones():
    nodes = [node("gpu-a100-dra-1"), node("gpu-a100-dra-2"), node("gpu-t4-dra-1")]
    claims = [claim_view(claim("ns-a", "c1", [("gpu-a100-dra-1", "gpu-0")], workload_id=7)),
              claim_view(claim("ns-b", "c2", [("gpu-a100-dra-2", "gpu-0"),
                                              ("gpu-a100-dra-2", "gpu-1")]))]
    by_type, claimed = dra_capacity([dra_type(), dra_type("t4-dra", product="Tesla T4",
                                                         memory_gb=16)],
                                    nodes, slices(A100, T4), claims)
    assert by_type["a100-dra"] == GpuTypeCapacity(
        slug="a100-dra", nodes=2, capacity=4, allocatable=4, allocated=3, largest_node=2,
        largest_free_block=1, matching_nodes=2, installed=4, node_gpus=((2, 1), (2, 0)))
    assert (by_type["a100-dra"].free, by_type["t4-dra"].free) == (1, 4)
    assert by_type["t4-dra"].largest_node == 4
    assert claimed == frozenset({7})  # placed: not counted again as admitted without a pod
    assert devices_in_use([dra_type()], slices(A100), claims) == {"ns-a": {"a100-dra": 1},
                                                                 "ns-b": {"a100-dra": 2}}


def test_a_cordoned_node_offers_none_and_an_old_generation_counts_no_more():
    old = slice_view(resource_slice(DraPool(), "gpu-a100-dra-1"))
    newer = old._replace(generation=2, devices=old.devices[:1])
    by_type, _ = dra_capacity([dra_type()], [node("gpu-a100-dra-1")], [old, newer], [])
    assert (by_type["a100-dra"].installed, by_type["a100-dra"].allocatable) == (1, 1)
    by_type, _ = dra_capacity([dra_type()], [node("gpu-a100-dra-1", cordoned=True)], [old], [])
    assert (by_type["a100-dra"].installed, by_type["a100-dra"].allocatable,
            by_type["a100-dra"].matching_nodes) == (2, 0, 1)


def test_an_unallocated_claim_is_not_kept():
    assert claim_view({"metadata": {"name": "c"}, "status": {}}) is None
    assert claim_view(claim("ns", "c", [("p", "gpu-0")])) is not None


def test_a_type_placed_by_its_extended_resource_is_left_to_the_nodes():
    exclusive = SimpleNamespace(slug="a100", resource_name="nvidia.com/gpu",
                                node_selector={"gputype": "a100"}, device_class="",
                                product="", memory_gb=80)
    assert dra_capacity([exclusive], [], slices(A100), [])[0] == {}


H100 = DraPool(name="h100", product="NVIDIA H100 80GB HBM3", architecture="Hopper",
               partitionable=True)
H100_NODE = "gpu-h100-dra-1"


def h100_type(slug: str, profile: str = "") -> SimpleNamespace:
    found = dra_type(slug, device_class="mig.nvidia.com" if profile else "gpu.nvidia.com",
                     product="NVIDIA H100 80GB HBM3",
                     memory_gb=int(profile.split(".")[1][:-2]) if profile else 80)
    found.dra_profile = profile
    return found


WHOLE, ONE_G, THREE_G = (h100_type("h100-dra"), h100_type("h100-1g-10gb-dra", "1g.10gb"),
                         h100_type("h100-3g-40gb-dra", "3g.40gb"))


def partitioned(*held: str) -> dict:
    """The three H100 types' figures with these devices of gpu-h100-dra-1 allocated."""
    claims = [claim_view(claim("ns", f"c-{name}", [(H100_NODE, name)])) for name in held]
    figures, _ = dra_capacity([WHOLE, ONE_G, THREE_G], [node(H100_NODE)],
                              [slice_view(piece) for piece in resource_slices(H100, H100_NODE)],
                              claims)
    return {slug: (f.capacity, f.allocatable, f.allocated, f.free)
            for slug, f in figures.items()}


def test_a_partitionable_gpu_is_published_with_its_counters_and_valid_slices():
    import kubernetes_validate

    version = kubernetes_validate.utils.latest_version()
    pieces = resource_slices(H100, H100_NODE)
    for piece in pieces:
        kubernetes_validate.validate(piece, version, strict=True)
    devices, counters = (slice_view(piece) for piece in pieces)
    assert counters.counters[0][0] == "gpu-0-counter-set"
    assert dict(counters.counters[0][1])["memory"] == 80 * 2**30
    by_name = {d.name: d for d in devices.devices}
    assert (by_name["gpu-1-mig-3g-40gb-4"].type, by_name["gpu-1-mig-3g-40gb-4"].profile) == (
        "mig", "3g.40gb")
    assert dict(by_name["gpu-1-mig-3g-40gb-4"].consumes)["gpu-1-counter-set"] == (
        ("memory", 40 * 2**30), ("memory-slice-4", 1), ("memory-slice-5", 1),
        ("memory-slice-6", 1), ("memory-slice-7", 1))
    # a MIG type matches its profile's devices only
    assert sum(device_matches(ONE_G, d) for d in devices.devices) == 14
    assert sum(device_matches(THREE_G, d) for d in devices.devices) == 4
    assert sum(device_matches(WHOLE, d) for d in devices.devices) == 2


def test_whole_gpus_and_their_profiles_exclude_each_other_as_the_counters_say():
    # (capacity, allocatable, allocated, free): nothing held, every GPU can be had either way
    assert partitioned() == {"h100-dra": (2, 2, 0, 2), "h100-1g-10gb-dra": (14, 14, 0, 14),
                             "h100-3g-40gb-dra": (4, 4, 0, 4)}
    # a 1g.10gb on gpu-0: its whole GPU and the 3g.40gb on its slices 0-3 cannot be had
    assert partitioned("gpu-0-mig-1g-10gb-0") == {
        "h100-dra": (2, 1, 0, 1), "h100-1g-10gb-dra": (14, 14, 1, 13),
        "h100-3g-40gb-dra": (4, 3, 0, 3)}
    # a whole gpu-1 held: none of its profiles is left
    assert partitioned("gpu-0-mig-1g-10gb-0", "gpu-1") == {
        "h100-dra": (2, 1, 1, 0), "h100-1g-10gb-dra": (14, 7, 1, 6),
        "h100-3g-40gb-dra": (4, 1, 0, 1)}


def test_the_admins_node_layout_says_how_each_partitionable_gpu_is_carved_now():
    from cluster.devices import node_layouts

    devices = published_devices([slice_view(piece)
                                 for piece in resource_slices(H100, H100_NODE)]
                                + slices(DraPool()))
    held = [(H100_NODE, H100_NODE, "gpu-0-mig-1g-10gb-0"), (H100_NODE, H100_NODE,
                                                            "gpu-0-mig-1g-10gb-3"),
            (H100_NODE, H100_NODE, "gpu-1")]
    layouts = node_layouts(devices, [("gpu.nvidia.com", pool, name) for _, pool, name in held])
    assert layouts[H100_NODE] == (
        "2 × NVIDIA H100 80GB HBM3, partitionable (DRA): gpu-0 2 × 1g.10gb in use; "
        "gpu-1 whole in use", "2 GPUs, or parts of them: 14 × 1g.10gb, 4 × 3g.40gb")
    assert layouts["gpu-a100-dra-1"] == ("2 × NVIDIA A100-SXM4-80GB (DRA)", "2 GPUs")
