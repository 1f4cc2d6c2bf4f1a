"""kubesim's own control API under /kubesim/v1/: inspect the simulated hardware, inject faults.

- `GET  /kubesim/v1/gpus`                         every GPU / MIG device with its holder, faults, sample
- `GET  /kubesim/v1/gpus/{node}`                  the devices of one node
- `POST /kubesim/v1/gpus/{node}/{index}/xid`      `{"xid": 79}`: the GPU reports that XID
- `POST /kubesim/v1/gpus/{node}/{index}/ecc`      `{"dbe": 1}`: add double-bit ECC errors
- `POST /kubesim/v1/gpus/{node}/{index}/lost`     the GPU falls off the bus (no more metrics)
- `DELETE /kubesim/v1/gpus/{node}/{index}/fault`  clear every fault of that GPU
- `GET  /kubesim/v1/address-pools`                the LoadBalancer pools and what they hand out
- `GET  /kubesim/v1/nodes`                        per node: resources requested by its pods
- `POST /kubesim/v1/compact`                      compact the history up to now, as etcd
                                                  compaction does: older resourceVersions get 410

A critical XID or a lost GPU makes the device unhealthy: the node's allocatable count of its
resource drops, as the NVIDIA device plugin reports it, and the scheduler stops using it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from aiohttp import web

from kubesim.gpus import Device
from kubesim.resources import by_kind
from kubesim.store import clone

if TYPE_CHECKING:
    from kubesim.cluster import Cluster

NODE = by_kind("Node")


def device_json(cluster: Cluster, device: Device) -> dict[str, Any]:
    sample = None if device.lost else cluster.gpus.advance(device, cluster.now())
    holder = device.holder
    return {
        "node": device.node,
        "index": device.index,
        "uuid": device.uuid,
        "deviceId": device.device_id,
        "resource": device.resource,
        "model": device.model.model_name,
        "product": device.model.product,
        "memoryMiB": device.memory_mib,
        "migProfile": device.mig_profile,
        "healthy": device.healthy,
        "faults": {"xid": device.xid, "eccDbe": device.ecc_dbe, "lost": device.lost},
        "holder": None if holder is None else {
            "namespace": holder.namespace, "pod": holder.pod, "container": holder.container,
            "trace": holder.trace},
        "sample": None if sample is None else {
            "util": sample.util, "memCopyUtil": sample.mem_copy_util,
            "fbUsedMiB": sample.fb_used_mib, "tempC": sample.temp_c, "powerW": sample.power_w,
            "energyMJ": int(device.energy_mj)},
    }


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


def routes(cluster: Cluster) -> list[web.RouteDef]:
    def devices_of(request: web.Request) -> list[Device] | web.Response:
        node = request.match_info["node"]
        if node not in cluster.gpus.by_node:
            return _error(404, f'node "{node}" has no simulated GPUs')
        try:
            index = int(request.match_info["index"])
        except ValueError:
            return _error(400, "the GPU index must be an integer")
        devices = cluster.gpus.find(node, index)
        if not devices:
            return _error(404, f'node "{node}" has no GPU {index}')
        return devices

    async def body(request: web.Request) -> dict[str, Any] | web.Response:
        if not request.can_read_body:
            return {}
        try:
            data = json.loads(await request.read() or b"{}")
        except ValueError:
            return _error(400, "the body must be JSON")
        return data if isinstance(data, dict) else _error(400, "the body must be a JSON object")

    def after_fault(devices: list[Device]) -> web.Response:
        refresh_allocatable(cluster, devices[0].node)
        return web.json_response({"items": [device_json(cluster, d) for d in devices]})

    async def list_gpus(request: web.Request) -> web.Response:
        items = [device_json(cluster, d) for node in sorted(cluster.gpus.by_node)
                 for d in cluster.gpus.by_node[node]]
        return web.json_response({"items": items})

    async def node_gpus(request: web.Request) -> web.Response:
        node = request.match_info["node"]
        if node not in cluster.gpus.by_node:
            return _error(404, f'node "{node}" has no simulated GPUs')
        return web.json_response({"items": [device_json(cluster, d)
                                            for d in cluster.gpus.by_node[node]]})

    async def integer_fault(request: web.Request, field: str, default: int,
                            apply: Callable[[Device, int], None]) -> web.Response:
        """A fault carrying one integer from the body (`{"xid": 79}`, `{"dbe": 1}`)."""
        devices = devices_of(request)
        if isinstance(devices, web.Response):
            return devices
        data = await body(request)
        if isinstance(data, web.Response):
            return data
        try:
            value = int(data.get(field, default))
        except (TypeError, ValueError):
            return _error(400, f"{field} must be an integer")
        for d in devices:
            apply(d, value)
        return after_fault(devices)

    async def set_xid(request: web.Request) -> web.Response:
        return await integer_fault(request, "xid", 79, lambda d, xid: setattr(d, "xid", xid))

    async def add_ecc(request: web.Request) -> web.Response:
        def add(d: Device, dbe: int) -> None:
            d.ecc_dbe += dbe

        return await integer_fault(request, "dbe", 1, add)

    async def set_lost(request: web.Request) -> web.Response:
        devices = devices_of(request)
        if isinstance(devices, web.Response):
            return devices
        for d in devices:
            d.lost = True
        return after_fault(devices)

    async def clear(request: web.Request) -> web.Response:
        devices = devices_of(request)
        if isinstance(devices, web.Response):
            return devices
        for d in devices:
            d.xid, d.ecc_dbe, d.lost = 0, 0, False
        return after_fault(devices)

    async def pools(request: web.Request) -> web.Response:
        return web.json_response({"pools": cluster.loadbalancer.snapshot()})

    async def nodes(request: web.Request) -> web.Response:
        return web.json_response({"nodes": cluster.scheduler.snapshot()})

    async def compact(request: web.Request) -> web.Response:
        return web.json_response({"revision": cluster.store.compact()})

    prefix = "/kubesim/v1"
    return [
        web.get(f"{prefix}/gpus", list_gpus),
        web.get(f"{prefix}/gpus/{{node}}", node_gpus),
        web.post(f"{prefix}/gpus/{{node}}/{{index}}/xid", set_xid),
        web.post(f"{prefix}/gpus/{{node}}/{{index}}/ecc", add_ecc),
        web.post(f"{prefix}/gpus/{{node}}/{{index}}/lost", set_lost),
        web.delete(f"{prefix}/gpus/{{node}}/{{index}}/fault", clear),
        web.get(f"{prefix}/address-pools", pools),
        web.get(f"{prefix}/nodes", nodes),
        web.post(f"{prefix}/compact", compact),
    ]


def refresh_allocatable(cluster: Cluster, node_name: str) -> None:
    """Advertise only healthy devices, as the device plugin does after a health change."""
    node = cluster.peek(NODE, None, node_name)
    if node is None:
        return
    status = clone(node.get("status") or {})
    allocatable = status.setdefault("allocatable", {})
    resources = {d.resource for d in cluster.gpus.by_node.get(node_name, ())}
    for resource in resources:
        allocatable[resource] = str(cluster.gpus.healthy_count(node_name, resource))
    cluster.write_status(NODE, node, status)
