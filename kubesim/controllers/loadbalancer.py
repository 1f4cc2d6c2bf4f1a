"""A MetalLB-like allocator: Services of type LoadBalancer get an address from a pool.

Pools come from the inventory's `addressPools` and `SimConfig.lb_pools` (CIDRs, `a-b` ranges
or single addresses). A Service picks its pool with the annotation `metallb.io/address-pool`
(`metallb.universe.tf/address-pool` is still read), may ask for specific addresses with
`metallb.io/loadBalancerIPs` (or `spec.loadBalancerIP`), and otherwise gets the lowest free
address of an auto-assigning pool (`default` first). No address free: the Service stays
pending (`status.loadBalancer: {}`) with a Warning `AllocationFailed` ("no available IPs";
from a pool the Service names, MetalLB v0.15.2's '["<nil>"] is not allowed in config'), and is
retried when an address is released. Events and messages are MetalLB's.

Each pool is published as MetalLB's IPAddressPool (metallb.io/v1beta1, in `metallb-system`)
whose status counts its addresses as MetalLB's controller does (`assignedIPv4`,
`availableIPv4` = the pool's addresses less those assigned): what the portal reads to know how
many are free. The pools themselves come from the inventory and the options; an edit of the
published objects is not read back.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kubesim.resources import Obj, by_kind
from kubesim.store import clone

if TYPE_CHECKING:
    from kubesim.cluster import Cluster

SERVICE = by_kind("Service")
NAMESPACE = by_kind("Namespace")
POOL = by_kind("IPAddressPool")
POOL_NAMESPACE = "metallb-system"
COMPONENT = "metallb-controller"
PREFIXES = ("metallb.io/", "metallb.universe.tf/")

Key = tuple[str, str]


def _annotation(service: Obj, name: str) -> str | None:
    annotations: dict[str, str] = service["metadata"].get("annotations") or {}
    for prefix in PREFIXES:
        if prefix + name in annotations:
            return annotations[prefix + name]
    return None


def expand(spec: str) -> Iterator[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    """Addresses of `192.168.1.240/28`, `192.168.1.240-192.168.1.250` or one address."""
    spec = spec.strip()
    if "-" in spec:
        first, last = (ipaddress.ip_address(p.strip()) for p in spec.split("-", 1))
        current = first
        while current <= last:  # type: ignore[operator]  # two families: a TypeError
            yield current
            current += 1
    elif "/" in spec:
        network = ipaddress.ip_network(spec, strict=False)
        # MetalLB hands out every address of a CIDR, network and broadcast included
        # (avoidBuggyIPs is off by default).
        yield from network
    else:
        yield ipaddress.ip_address(spec)


@dataclass
class AddressPool:
    name: str
    ranges: list[str]
    auto_assign: bool = True
    _members: set[str] | None = field(default=None, repr=False)

    def addresses(self) -> Iterator[str]:
        for spec in self.ranges:
            for address in expand(spec):
                yield str(address)

    def contains(self, address: str) -> bool:
        if self._members is None:
            self._members = set(self.addresses()) if self.size() <= 65536 else set()
        if self._members:
            return address in self._members
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return False
        return any(ip in ipaddress.ip_network(r, strict=False) for r in self.ranges if "/" in r)

    def size(self, family: int | None = None) -> int:
        """How many addresses it holds (of one address family: 4 or 6)."""
        total = 0
        for spec in self.ranges:
            if family is not None and (6 if ":" in spec else 4) != family:
                continue
            if "-" in spec:
                first, last = (int(ipaddress.ip_address(p.strip())) for p in spec.split("-", 1))
                total += max(0, last - first + 1)
            elif "/" in spec:
                total += ipaddress.ip_network(spec, strict=False).num_addresses
            else:
                total += 1
        return total


class LoadBalancerController:
    def __init__(self, cluster: Cluster):
        self.cluster = cluster
        self.queue = cluster.make_queue("loadbalancer", self.reconcile)
        self.pools: dict[str, AddressPool] = {}
        for spec in cluster.inventory.address_pools.values():
            self.pools[spec.name] = AddressPool(spec.name, list(spec.addresses), spec.auto_assign)
        for name, ranges in (cluster.config.lb_pools or {}).items():
            self.pools[name] = AddressPool(name, list(ranges))
        self.allocated: dict[str, Key] = {}  # address -> service
        self.by_service: dict[Key, list[str]] = {}
        self.pending: set[Key] = set()
        self._publish_pools()

    # -- the pools as MetalLB's IPAddressPool objects -------------------------------------

    def _publish_pools(self) -> None:
        store = self.cluster.store
        if not self.pools:
            return
        if store.peek(NAMESPACE, None, POOL_NAMESPACE) is None:
            store.create(NAMESPACE, {"apiVersion": "v1", "kind": "Namespace",
                                     "metadata": {"name": POOL_NAMESPACE}})
        for pool in self.pools.values():
            if store.peek(POOL, POOL_NAMESPACE, pool.name) is None:
                store.create(POOL, {
                    "apiVersion": POOL.api_version, "kind": POOL.kind,
                    "metadata": {"name": pool.name, "namespace": POOL_NAMESPACE},
                    "spec": {"addresses": list(pool.ranges), "autoAssign": pool.auto_assign}})
        self._pool_status()

    def _pool_status(self) -> None:
        """Each published pool's counts, as MetalLB's pool status controller writes them."""
        for pool in self.pools.values():
            published = self.cluster.peek(POOL, POOL_NAMESPACE, pool.name)
            if published is None:
                continue
            held = [ip for ip in self.allocated if pool.contains(ip)]
            held6 = sum(1 for ip in held if ":" in ip)
            size6 = pool.size(family=6)
            size4 = pool.size() - size6
            status = {"assignedIPv4": len(held) - held6, "assignedIPv6": held6,
                      "availableIPv4": max(0, size4 - (len(held) - held6)),
                      "availableIPv6": max(0, size6 - held6)}
            if published.get("status") != status:
                self.cluster.write_status(POOL, published, status)

    def on_service(self, event: str, service: Obj) -> None:
        key = (service["metadata"]["namespace"], service["metadata"]["name"])
        if event == "DELETED":
            self.release(key)
            self.queue.forget(key)
            return
        self.queue.add(key)

    def release(self, key: Key) -> None:
        freed = self.by_service.pop(key, [])
        for address in freed:
            if self.allocated.get(address) == key:
                del self.allocated[address]
        self.pending.discard(key)
        if freed:
            self._pool_status()
            for waiting in self.pending:
                self.queue.add(waiting)

    def _pool_for(self, service: Obj) -> AddressPool | None:
        wanted = _annotation(service, "address-pool")
        if wanted:
            return self.pools.get(wanted)
        if "default" in self.pools and self.pools["default"].auto_assign:
            return self.pools["default"]
        return next((p for p in self.pools.values() if p.auto_assign), None)

    def reconcile(self, key: Key) -> None:
        service = self.cluster.peek(SERVICE, *key)
        if service is None:
            self.release(key)
            return
        spec = service.get("spec") or {}
        if spec.get("type") != "LoadBalancer" or spec.get("loadBalancerClass"):
            if key in self.by_service:
                self.release(key)
                self._write(service, [])
            return
        current = [i.get("ip") for i in ((service.get("status") or {}).get("loadBalancer") or {})
                   .get("ingress") or () if i.get("ip")]
        if key in self.by_service and self.by_service[key] == current:
            return
        if current and key not in self.by_service and all(
                self.allocated.get(ip, key) == key for ip in current):
            # Already assigned (a loaded state file): take ownership of what it holds.
            for ip in current:
                self.allocated[ip] = key
            self.by_service[key] = current
            self._pool_status()
            return
        requested_raw = _annotation(service, "loadBalancerIPs") or spec.get("loadBalancerIP") or ""
        requested = [ip.strip() for ip in requested_raw.split(",") if ip.strip()]
        pool = self._pool_for(service)
        name = f"{key[0]}/{key[1]}"
        if pool is None:
            wanted = _annotation(service, "address-pool")
            reason = (f'unknown pool "{wanted}"' if wanted else "no available IPs")
            self._fail(service, key, f'Failed to allocate IP for "{name}": {reason}')
            return
        addresses: list[str] = []
        if requested:
            for ip in requested:
                holder = self.allocated.get(ip)
                owner_pool = next((p for p in self.pools.values() if p.contains(ip)), None)
                if owner_pool is None:
                    self._fail(service, key, f'Failed to allocate IP for "{name}": '
                                             f'["{ip}"] is not allowed in config')
                    return
                if holder is not None and holder != key and not self._shareable(service, holder):
                    self._fail(service, key, f'Failed to allocate IP for "{name}": '
                                             f"can't change sharing key for \"{name}\", address "
                                             f"also in use by {holder[0]}/{holder[1]}")
                    return
                addresses.append(ip)
        else:
            free = next((ip for ip in pool.addresses() if ip not in self.allocated), None)
            if free is None:
                # MetalLB v0.15.2's words: from a pool the Service names, its search returns no
                # address and no error, and the nil address it then assigns is refused
                why = ('["<nil>"] is not allowed in config' if _annotation(service, "address-pool")
                       else "no available IPs")
                self._fail(service, key, f'Failed to allocate IP for "{name}": {why}')
                return
            addresses = [free]
        for ip in addresses:
            self.allocated[ip] = key
        self.by_service[key] = addresses
        self.pending.discard(key)
        self._pool_status()
        self._write(service, addresses)
        quoted = ",".join(f'"{ip}"' for ip in addresses)
        self.cluster.record_event(service, "Normal", "IPAllocated", f"Assigned IP [{quoted}]",
                                  COMPONENT)
        node = next(iter(sorted(self.cluster.kubelet.nodes)), None)
        if node is not None:
            self.cluster.record_event(service, "Normal", "nodeAssigned",
                                      f'announcing from node "{node}" with protocol "layer2"',
                                      "metallb-speaker")

    def _shareable(self, service: Obj, holder: Key) -> bool:
        other = self.cluster.peek(SERVICE, *holder)
        mine = _annotation(service, "allow-shared-ip")
        return bool(other is not None and mine and mine == _annotation(other, "allow-shared-ip"))

    def _fail(self, service: Obj, key: Key, message: str) -> None:
        if key in self.pending:
            return  # already reported; retried when an address frees
        self.pending.add(key)
        self.release_only(key)
        self._write(service, [])
        self.cluster.record_event(service, "Warning", "AllocationFailed", message, COMPONENT)

    def release_only(self, key: Key) -> None:
        freed = self.by_service.pop(key, [])
        for address in freed:
            if self.allocated.get(address) == key:
                del self.allocated[address]
        if freed:
            self._pool_status()

    def _write(self, service: Obj, addresses: list[str]) -> None:
        status = clone(service.get("status") or {})
        status["loadBalancer"] = (
            {"ingress": [{"ip": ip, "ipMode": "VIP"} for ip in addresses]} if addresses else {}
        )
        self.cluster.write_status(SERVICE, service, status)

    def snapshot(self) -> Obj:
        return {
            name: {"addresses": pool.ranges, "autoAssign": pool.auto_assign,
                   "size": pool.size(),
                   "allocated": {ip: f"{k[0]}/{k[1]}" for ip, k in sorted(self.allocated.items())
                                 if pool.contains(ip)}}
            for name, pool in self.pools.items()
        }
