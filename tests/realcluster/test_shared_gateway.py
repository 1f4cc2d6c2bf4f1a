"""The shared-address mode on the real control plane: a burst of notebooks
past an address pool of two, behind one gateway — Traefik with its Kubernetes Ingress provider
(stack/k8s/traefik.py) — that takes one address of the pool. Every notebook runs with its URL,
and a request through the real gateway for each host name reaches that workload's own
authenticating proxy (oauth2-proxy, run on loopback from the workload's own configuration:
access/services.workload_proxy), which sends the browser to the portal's login for its
own OAuth client, with its callback on its own host name.

KWOK's pods have made-up addresses, and an EndpointSlice may not hold a loopback address: each
workload's Service is turned selector-less and given an EndpointSlice of address type FQDN whose
name only the gateway resolves, to 127.0.0.1 (stack/k8s/traefik.py, `loopback_names`), on the
port of that workload's proxy. Everything else on the path is the real thing: the portal's
Ingress and Service, Traefik's routing by host, its EndpointSlice lookup, the proxy."""

from __future__ import annotations

import contextlib
import urllib.parse

import httpx
import pytest
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException

from cluster.addresses import address_pools
from stack.authproxy import AuthProxy
from stack.k8s.build import apply_object
from stack.k8s.metallb import NAMESPACE as METALLB_NAMESPACE
from stack.k8s.traefik import INGRESS_CLASS, NAMESPACE, SERVICE, Traefik
from tests.support.tracking import state_of, track_until
from tests.support.waiting import eventually
from tests.workloads.api_calls import launch as api_launch
from tests.workloads.api_calls import vision_lab_ready
from workloads.access import workload_proxy
from workloads.models import Workload
from workloads.tracking.tracker import Tracker

pytestmark = [pytest.mark.django_db, pytest.mark.realcluster, pytest.mark.timeout(300),
              pytest.mark.builds("traefik")]

POOL = "gateway-two"
POOL_ADDRESSES = ["192.168.2.10-192.168.2.11"]  # assigned by MetalLB, never sent to
DOMAIN = "apps.gpu-portal.test"
LOOPBACK = "loopback.gateway.test"  # resolved to 127.0.0.1 by the gateway alone
NOTEBOOKS = 4  # more than the pool holds


def ip_pool() -> dict:
    return {"apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
            "metadata": {"name": POOL, "namespace": METALLB_NAMESPACE},
            "spec": {"addresses": POOL_ADDRESSES, "autoAssign": False}}


@pytest.fixture(scope="module")
def gateway(real_cluster):
    with real_cluster.api_client() as api:
        apply_object(api, ip_pool())
    traefik = Traefik(address_pool=POOL, loopback_names=(LOOPBACK,))
    traefik.start(real_cluster)
    yield traefik
    traefik.stop()
    with real_cluster.api_client() as api:
        k8s.CoreV1Api(api).delete_namespaced_service(SERVICE, NAMESPACE)
        k8s.CustomObjectsApi(api).delete_namespaced_custom_object(
            "metallb.io", "v1beta1", METALLB_NAMESPACE, "ipaddresspools", POOL)


@pytest.fixture
def shared(gateway, cluster, settings, login, gpu_types):
    settings.PORTAL_SERVICE_EXPOSURE = "shared"
    settings.PORTAL_SERVICE_DOMAIN = DOMAIN
    settings.PORTAL_SERVICE_SCHEME = "http"
    settings.PORTAL_SERVICE_PORT = gateway.port
    settings.PORTAL_INGRESS_CLASS = INGRESS_CLASS
    settings.PORTAL_LB_ADDRESS_POOL = POOL
    return vision_lab_ready(login)


def to_loopback(api, namespace: str, service: str, port: int) -> None:
    """The workload's Service leads to its proxy on loopback (see the module's docstring)."""
    core, discovery = k8s.CoreV1Api(api), k8s.DiscoveryV1Api(api)
    core.patch_namespaced_service(service, namespace, {"spec": {"selector": None}})
    discovery.create_namespaced_endpoint_slice(namespace, {
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": f"{service}-loopback", "labels": {
            "kubernetes.io/service-name": service,
            "endpointslice.kubernetes.io/managed-by": "tests.gpu-portal.io"}},
        "addressType": "FQDN",
        "endpoints": [{"addresses": [LOOPBACK], "conditions": {"ready": True}}],
        "ports": [{"name": "http", "protocol": "TCP", "port": port}]})

    def only_ours() -> bool:
        # the controllers' own (KWOK's made-up pod address) go, and stay gone: the Endpoints
        # object, which the mirroring controller would copy into a slice of a selector-less
        # Service, and the EndpointSlice controller's slices
        with contextlib.suppress(ApiException):
            core.delete_namespaced_endpoints(service, namespace)
        slices = discovery.list_namespaced_endpoint_slice(
            namespace, label_selector=f"kubernetes.io/service-name={service}").items
        theirs = [s for s in slices if s.metadata.name != f"{service}-loopback"]
        for stale in theirs:
            with contextlib.suppress(ApiException):  # its controller may delete it first
                discovery.delete_namespaced_endpoint_slice(stale.metadata.name, namespace)
        return not theirs

    eventually(only_ours, timeout=30, interval=0.5,
               message=f"{service} still has the controller's EndpointSlices")


def login_redirect(gateway: Traefik, host: str) -> str:
    """Where the proxy behind `host` sends a browser that is not signed in: the issuer's
    authorize URL (following the proxy's own relative redirects, through the gateway)."""
    path = "/"
    for _ in range(3):
        answer = httpx.get(f"{gateway.url}{path}", headers={"Host": host}, timeout=5)
        assert answer.status_code in (302, 303), (host, answer.status_code, answer.text[:300])
        location = answer.headers["location"]
        if location.startswith("/"):
            path = location
            continue
        return location
    raise AssertionError(f"{host}: no redirect to the issuer")


def test_a_burst_past_the_pool_runs_behind_one_gateway_address(gateway, shared, api_headers,
                                                               eager_celery, tmp_path,
                                                               real_cluster):
    with real_cluster.api_client() as api:
        core = k8s.CoreV1Api(api)
        # the gateway holds one address of the two
        eventually(lambda: core.read_namespaced_service_status(
            SERVICE, NAMESPACE).status.load_balancer.ingress, timeout=30, interval=0.5,
            message="the gateway's Service got no address")
    headers = api_headers("researcher")
    ids = []
    for i in range(NOTEBOOKS):
        response = api_launch(headers, {"name": f"nb{i}", "template": "jupyter",
                                        "gpu_type": "a100", "gpu_count": 1})
        assert response.status_code == 201, response.json()
        ids.append(response.json()["id"])
    notebooks = list(Workload.objects.filter(pk__in=ids).order_by("pk"))
    track_until(Tracker(), lambda: all(state_of(n).state == Workload.State.RUNNING and n.url
                                       for n in notebooks), timeout=120,
                describe=lambda: repr([(n.state, n.address, n.reason) for n in notebooks]))
    pool = address_pools(fresh=True)
    assert pool.names == (POOL,) and pool.total == 2 and pool.free == 1  # the gateway's only

    proxies = []
    try:
        with real_cluster.api_client() as api:
            for notebook in notebooks:
                assert notebook.url == f"http://w-{notebook.pk}.{DOMAIN}:{gateway.port}/lab"
                spec, secrets = workload_proxy(notebook)
                if spec.upstream_token_env:  # the application's token, from the same Secret
                    secrets[spec.upstream_token_env] = notebook.access_token
                proxy = AuthProxy(spec, secrets=secrets,
                                  workdir=tmp_path / f"proxy-{notebook.pk}").start()
                proxies.append(proxy)
                to_loopback(api, shared.namespace, notebook.object_name, proxy.spec.listen_port)
        # no request is sent before the gateway routes every workload to loopback alone
        # (never to the made-up pod addresses it may have seen first)
        wanted = sorted(f"http://{LOOPBACK}:{p.spec.listen_port}" for p in proxies)
        eventually(lambda: sorted(url for name, urls in gateway.servers().items()
                                  if name.startswith(shared.namespace)
                                  for url in urls) == wanted,
                   timeout=30, interval=0.5, message=lambda: f"the gateway routes to "
                                                             f"{gateway.servers()}")
        for notebook, proxy in zip(notebooks, proxies, strict=True):
            host = f"w-{notebook.pk}.{DOMAIN}"

            def routed(host=host, proxy=proxy) -> dict:
                query = urllib.parse.parse_qs(urllib.parse.urlsplit(
                    login_redirect(gateway, host)).query)
                assert query["client_id"] == [proxy.spec.client_id]
                return query

            query = eventually(routed, timeout=30, interval=0.5, ignoring=(httpx.HTTPError,),
                               message=f"{host} did not reach its own proxy")
            assert query["redirect_uri"] == \
                [f"http://{host}:{gateway.port}/oauth2/callback"]
        # a host name no workload has: the gateway's own 404
        assert httpx.get(gateway.url, headers={"Host": f"w-0.{DOMAIN}"}, timeout=5) \
            .status_code == 404
    finally:
        for proxy in proxies:
            proxy.stop()

