"""Services of type LoadBalancer on the real control plane get their address from MetalLB's own
controller (stack/k8s/metallb.py), out of the IPAddressPools made from the inventory's
addressPools: status, events and the pool annotation as MetalLB writes them."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator

import pytest
from kubernetes import client

from kubesim.inventory import load_inventory
from stack.k8s.cluster import DEMO_INVENTORY
from tests.support.waiting import eventually

NAMESPACE = "metallb-system"




def service(name: str, annotations: dict[str, str] | None = None) -> dict:
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "annotations": annotations or {}},
            "spec": {"type": "LoadBalancer", "selector": {"app": name},
                     "ports": [{"name": "http", "port": 80, "targetPort": 8888}]}}


def ingress(core: client.CoreV1Api, namespace: str, name: str) -> list:
    status = core.read_namespaced_service_status(name, namespace).status
    return (status.load_balancer and status.load_balancer.ingress) or []


def events(core: client.CoreV1Api, namespace: str, name: str) -> list:
    return core.list_namespaced_event(
        namespace, field_selector=f"involvedObject.kind=Service,involvedObject.name={name}").items


def in_pool(ip: str, addresses: list[str]) -> bool:
    address = ipaddress.ip_address(ip)
    for entry in addresses:
        if "-" in entry:
            first, last = (ipaddress.ip_address(p.strip()) for p in entry.split("-"))
            if first <= address <= last:
                return True
        elif address in ipaddress.ip_network(entry, strict=False):
            return True
    return False


@pytest.fixture
def core(real_cluster) -> Iterator[client.CoreV1Api]:
    with real_cluster.api_client() as api:
        yield client.CoreV1Api(api)


def test_a_loadbalancer_service_gets_an_address_from_the_inventorys_pool(core, real_namespace):
    pool = load_inventory(str(DEMO_INVENTORY)).address_pools["default"]
    core.create_namespaced_service(real_namespace, service("jupyter"))

    (entry,) = eventually(lambda: ingress(core, real_namespace, "jupyter"), timeout=30, interval=0.1, message="an address")
    assert in_pool(entry.ip, pool.addresses)
    assert entry.ip_mode == "VIP"  # defaulted by the API server, as on any real cluster
    allocated = eventually(lambda: [e for e in events(core, real_namespace, "jupyter")
                                    if e.reason == "IPAllocated"], timeout=30, interval=0.1, message="the IPAllocated event")
    assert allocated[0].type == "Normal"
    assert allocated[0].message == f'Assigned IP ["{entry.ip}"]'
    assert allocated[0].source.component == "metallb-controller"
    annotations = core.read_namespaced_service(
        "jupyter", real_namespace).metadata.annotations or {}
    assert annotations.get("metallb.io/ip-allocated-from-pool") == "default"


@pytest.fixture
def small_pool(real_cluster, real_namespace) -> Iterator[str]:
    """A pool of one address that nothing takes unless it asks for it by name."""
    name = f"pool-{real_namespace}"
    with real_cluster.api_client() as api:
        objects = client.CustomObjectsApi(api)
        objects.create_namespaced_custom_object("metallb.io", "v1beta1", NAMESPACE,
                                                "ipaddresspools", {
            "apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
            "metadata": {"name": name},
            "spec": {"addresses": ["192.168.77.10/32"], "autoAssign": False}})
        # the controller has read the pool once it writes its status (stack/k8s/metallb.py
        # waits the same way for the inventory's): a Service asking for it before then is
        # refused a pool it does not know yet
        eventually(lambda: "availableIPv4" in (objects.get_namespaced_custom_object_status(
            "metallb.io", "v1beta1", NAMESPACE, "ipaddresspools", name).get("status") or {}),
            timeout=30, interval=0.1, message=f"metallb-controller has not read {name}")
        yield name
        objects.delete_namespaced_custom_object("metallb.io", "v1beta1", NAMESPACE,
                                                "ipaddresspools", name)


def test_the_address_pool_annotation_is_honoured_and_a_full_pool_is_reported(
        core, real_namespace, small_pool):
    wanted = {"metallb.io/address-pool": small_pool}
    core.create_namespaced_service(real_namespace, service("first", wanted))
    (entry,) = eventually(lambda: ingress(core, real_namespace, "first"), timeout=30, interval=0.1, message="first's address")
    assert entry.ip == "192.168.77.10"

    core.create_namespaced_service(real_namespace, service("second", wanted))
    failed = eventually(lambda: [e for e in events(core, real_namespace, "second")
                                 if e.reason == "AllocationFailed"], timeout=30, interval=0.1, message="AllocationFailed")
    assert failed[0].type == "Warning"
    assert failed[0].message.startswith(f'Failed to allocate IP for "{real_namespace}/second"')
    assert ingress(core, real_namespace, "second") == []

    # the address comes free with the first Service, and the waiting one gets it
    core.delete_namespaced_service("first", real_namespace)
    (entry,) = eventually(lambda: ingress(core, real_namespace, "second"), timeout=30, interval=0.1, message="second's address")
    assert entry.ip == "192.168.77.10"


def test_the_controller_runs_as_metallbs_own_service_account(real_cluster):
    (addon,) = [a for a in real_cluster.addons if a.name == "metallb"]
    assert addon.proc is not None and addon.proc.poll() is None
    text = addon.kubeconfig.read_text()
    assert "token:" in text and "client-certificate" not in text
    user = f"system:serviceaccount:{NAMESPACE}:controller"

    def allowed(verb: str, resource: str, subresource: str = "") -> bool:
        with real_cluster.api_client() as api:
            review = client.AuthorizationV1Api(api).create_subject_access_review({
                "spec": {"user": user, "resourceAttributes": {
                    "verb": verb, "resource": resource, "subresource": subresource,
                    "namespace": "default"}}})
        return review.status.allowed

    # upstream's RBAC for its controller, nothing more
    assert allowed("update", "services", "status") and allowed("watch", "services")
    assert not allowed("delete", "pods") and not allowed("update", "services")
