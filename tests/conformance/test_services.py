"""Services: defaulting and allocation, LoadBalancer addresses (MetalLB), Endpoints."""

from __future__ import annotations

import ipaddress

from tests.conformance import manifests as m
from tests.conformance.cluster import Cluster, events_for, eventually

POOL = [ipaddress.ip_address(f"192.168.1.{i}") for i in range(240, 251)]  # the demo inventory


def test_cluster_ip_service_defaults(cluster: Cluster, ns: str):
    body = cluster.request("POST", f"/api/v1/namespaces/{ns}/services", m.service("web")).json()
    spec = body["spec"]
    ipaddress.ip_address(spec["clusterIP"])
    assert spec["clusterIPs"] == [spec["clusterIP"]]
    assert (spec["type"], spec["sessionAffinity"], spec["ipFamilies"], spec["ipFamilyPolicy"],
            spec["internalTrafficPolicy"]) == ("ClusterIP", "None", ["IPv4"], "SingleStack",
                                               "Cluster")
    assert spec["ports"] == [{"name": "http", "protocol": "TCP", "port": 80, "targetPort": 80}]
    assert body["status"] == {"loadBalancer": {}}


def test_load_balancer_gets_an_address(cluster: Cluster, ns: str):
    created = cluster.request("POST", f"/api/v1/namespaces/{ns}/services",
                              m.service("lb", type_="LoadBalancer")).json()
    assert created["status"] == {"loadBalancer": {}}
    port = created["spec"]["ports"][0]
    assert 30000 <= port["nodePort"] <= 32767
    assert created["spec"]["externalTrafficPolicy"] == "Cluster"
    assert created["spec"]["allocateLoadBalancerNodePorts"] is True

    def assigned() -> list | None:
        svc = cluster.request("GET", f"/api/v1/namespaces/{ns}/services/lb").json()
        return svc["status"]["loadBalancer"].get("ingress")

    ingress = eventually(assigned, what="LoadBalancer address")
    assert len(ingress) == 1 and set(ingress[0]) == {"ip", "ipMode"}
    assert ingress[0]["ipMode"] == "VIP"
    assert ipaddress.ip_address(ingress[0]["ip"]) in POOL
    event = eventually(lambda: next((e for e in events_for(cluster, ns, "lb")
                                     if e["reason"] == "IPAllocated"), None),
                       what="IPAllocated event")
    assert (event["type"], event["message"]) == ("Normal", f'Assigned IP ["{ingress[0]["ip"]}"]')


def test_load_balancer_asks_for_an_address(cluster: Cluster, ns: str):
    svc = m.service("lb", type_="LoadBalancer")
    svc["metadata"]["annotations"] = {"metallb.io/loadBalancerIPs": "192.168.1.250"}
    cluster.request("POST", f"/api/v1/namespaces/{ns}/services", svc)
    ingress = eventually(lambda: cluster.request(
        "GET", f"/api/v1/namespaces/{ns}/services/lb").json()["status"]["loadBalancer"].get(
        "ingress"), what="requested address")
    assert ingress == [{"ip": "192.168.1.250", "ipMode": "VIP"}]


def test_endpoints_follow_ready_pods(cluster: Cluster, ns: str):
    cluster.request("POST", f"/api/v1/namespaces/{ns}/services", m.service("web"))
    cluster.core.create_namespaced_pod(ns, m.pod("web-1", labels={"app": "web"}))

    def addresses() -> list | None:
        resp = cluster.request("GET", f"/api/v1/namespaces/{ns}/endpoints/web")
        if resp.status != 200:
            return None
        subsets = resp.json().get("subsets") or []
        return subsets[0].get("addresses") if subsets else None

    [address] = eventually(addresses, what="ready address")
    pod = cluster.core.read_namespaced_pod("web-1", ns)
    assert address["ip"] == pod.status.pod_ip
    assert address["nodeName"] == pod.spec.node_name
    assert (address["targetRef"]["kind"], address["targetRef"]["name"]) == ("Pod", "web-1")
    ports = cluster.request("GET", f"/api/v1/namespaces/{ns}/endpoints/web").json()[
        "subsets"][0]["ports"]
    assert ports == [{"name": "http", "port": 80, "protocol": "TCP"}]
