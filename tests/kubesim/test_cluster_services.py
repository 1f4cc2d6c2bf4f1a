"""MetalLB-like LoadBalancer addresses and Endpoints over HTTP."""

from __future__ import annotations

import json
import urllib.request

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.kubesim.cluster_helpers import (
    container,
    deployment,
    event_reasons,
    pod_spec,
    write_inventory,
)
from tests.support.waiting import eventually


def lb_service(name: str, *, annotations: dict | None = None, selector: dict | None = None,
               target_port: int | str = 8080) -> dict:
    meta: dict = {"name": name}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Service", "metadata": meta,
            "spec": {"type": "LoadBalancer", "selector": selector or {"app": name},
                     "ports": [{"name": "http", "port": 80, "targetPort": target_port}]}}


def delete_service(core, name: str, ns: str) -> None:
    # The real API server answers a Service DELETE with a Status, which the generated client
    # cannot parse as the V1Service its OpenAPI promises: read the raw response instead.
    core.delete_namespaced_service(name, ns, _preload_content=False)


def get_json(server, path: str) -> dict:
    with urllib.request.urlopen(server.url + path, timeout=5) as resp:
        return json.loads(resp.read())


def ingress_ips(core, ns: str, name: str) -> list[str]:
    lb = core.read_namespaced_service(name, ns).status.load_balancer
    return [i.ip for i in (lb.ingress or [])] if lb else []


@pytest.fixture(scope="module")
def small(kubesim_factory, tmp_path_factory):
    """Two pools: `default` with two addresses, `gpu-pool` with one."""
    inventory = write_inventory(tmp_path_factory.mktemp("lb") / "inv.yaml", {
        "nodePools": [{"name": "cpu", "count": 1, "namePrefix": "cpu-"}],
        "addressPools": [{"name": "default", "addresses": ["10.20.0.10-10.20.0.11"]},
                         {"name": "gpu-pool", "addresses": ["10.30.0.5/32"]}]})
    return kubesim_factory(inventory=inventory)


@pytest.fixture(scope="module")
def core(small):
    with small.api_client() as api:
        yield client.CoreV1Api(api)


def test_allocation_exhaustion_and_release(core, small):
    ns = "default"
    core.create_namespaced_service(ns, lb_service("a"))
    eventually(lambda: ingress_ips(core, ns, "a") == ["10.20.0.10"],
               message="waiting for first address", ignoring=(ApiException,))
    raw = get_json(small, f"/api/v1/namespaces/{ns}/services/a")
    assert raw["status"]["loadBalancer"] == {"ingress": [{"ip": "10.20.0.10", "ipMode": "VIP"}]}
    assert ("IPAllocated", 'Assigned IP ["10.20.0.10"]') in event_reasons(core, ns, "a")
    core.create_namespaced_service(ns, lb_service("b"))
    eventually(lambda: ingress_ips(core, ns, "b") == ["10.20.0.11"],
               message="waiting for second address", ignoring=(ApiException,))
    core.create_namespaced_service(ns, lb_service("c"))
    eventually(lambda: any(r == "AllocationFailed" for r, _ in event_reasons(core, ns, "c")),
               message="waiting for AllocationFailed", ignoring=(ApiException,))
    failed = [e for e in core.list_namespaced_event(
        ns, field_selector="involvedObject.name=c").items if e.reason == "AllocationFailed"]
    assert failed[0].type == "Warning"
    assert failed[0].message == 'Failed to allocate IP for "default/c": no available IPs'
    raw = get_json(small, f"/api/v1/namespaces/{ns}/services/c")
    assert raw["status"]["loadBalancer"] == {}
    delete_service(core, "a", ns)
    eventually(lambda: ingress_ips(core, ns, "c") == ["10.20.0.10"],
               message="waiting for released address reused", ignoring=(ApiException,))
    for name in ("b", "c"):
        delete_service(core, name, ns)


def test_pool_annotation_and_requested_ip(core):
    ns = "default"
    core.create_namespaced_service(ns, lb_service("g", annotations={
        "metallb.io/address-pool": "gpu-pool"}))
    eventually(lambda: ingress_ips(core, ns, "g") == ["10.30.0.5"],
               message="waiting for address from gpu-pool", ignoring=(ApiException,))
    # the pool it names has none left: MetalLB v0.15.2's words for that (its search finds no
    # address and no error; the nil address it then assigns is refused)
    core.create_namespaced_service(ns, lb_service("g2", annotations={
        "metallb.io/address-pool": "gpu-pool"}))
    eventually(lambda: any(r == "AllocationFailed" for r, _ in event_reasons(core, ns, "g2")),
               message="waiting for AllocationFailed", ignoring=(ApiException,))
    assert ("AllocationFailed", 'Failed to allocate IP for "default/g2": ["<nil>"] is not '
            "allowed in config") in event_reasons(core, ns, "g2")
    delete_service(core, "g2", ns)
    delete_service(core, "g", ns)
    core.create_namespaced_service(ns, lb_service("old", annotations={
        "metallb.universe.tf/address-pool": "gpu-pool"}))
    eventually(lambda: ingress_ips(core, ns, "old") == ["10.30.0.5"],
               message="waiting for legacy annotation", ignoring=(ApiException,))
    delete_service(core, "old", ns)
    core.create_namespaced_service(ns, lb_service("pinned", annotations={
        "metallb.io/loadBalancerIPs": "10.20.0.11"}))
    eventually(lambda: ingress_ips(core, ns, "pinned") == ["10.20.0.11"],
               message="waiting for requested address", ignoring=(ApiException,))
    delete_service(core, "pinned", ns)


def test_endpoints_follow_ready_pods(api_client, kube_namespace):
    ns = kube_namespace
    core = client.CoreV1Api(api_client)
    apps = client.AppsV1Api(api_client)
    apps.create_namespaced_deployment(ns, deployment("web", pod_spec(container(
        ports=[{"name": "http", "containerPort": 8080}])), replicas=2))
    core.create_namespaced_service(ns, {"metadata": {"name": "web"}, "spec": {
        "selector": {"app": "web"}, "ports": [{"name": "http", "port": 80, "targetPort": "http"}]}})

    def ready_addresses():
        ep = core.read_namespaced_endpoints("web", ns)
        subsets = ep.subsets or []
        return subsets if subsets and len(subsets[0].addresses or []) == 2 else None

    subsets = eventually(ready_addresses, message="waiting for two ready addresses",
                         ignoring=(ApiException,))
    pods = {p.status.pod_ip: p for p in core.list_namespaced_pod(ns).items}
    assert {a.ip for a in subsets[0].addresses} == set(pods)
    assert all(a.target_ref.kind == "Pod" and a.node_name for a in subsets[0].addresses)
    assert [(p.name, p.port, p.protocol) for p in subsets[0].ports] == [("http", 8080, "TCP")]
    apps.patch_namespaced_deployment("web", ns, {"spec": {"replicas": 1}})
    eventually(lambda: len((core.read_namespaced_endpoints("web", ns).subsets or [None])[0]
                           .addresses or []) == 1,
               message="waiting for endpoints shrink with the pods", ignoring=(ApiException,))
