"""A DRA type's capacity from ResourceSlices and ResourceClaims (cluster/devices.py and the
pure parts of cluster/capacity.py): the devices that match its class and selectors, on nodes
that take pods, less those claims' allocations hold."""

from __future__ import annotations

from types import SimpleNamespace

from cluster.capacity import GpuTypeCapacity, devices_in_use, dra_capacity
from cluster.devices import claim_view, device_matches, published_devices, slice_view
from kube.labels import LABEL_WORKLOAD_ID
from stack.k8s.dra import DraPool, resource_slice


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
