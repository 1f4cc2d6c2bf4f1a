"""Services past the address pool, on a kubesim whose pool holds two
addresses: the workload that got none says why, the launch is refused before submit while none
is free (API, page, gpuctl), and an address freed goes to the one that waited."""

from __future__ import annotations

import pytest

from cluster.addresses import address_pools, address_pools_forget
from kube.client import Kube
from tenants.models import Tenant
from tenants.provisioning import tenant_reconcile
from tenants.services import quota_update
from tests.fixtures.kubesim import DEMO_INVENTORY
from tests.support.cluster import cluster_objects_of_the_test
from tests.support.gpuctl import openrc
from tests.support.gpuctl import run as run_gpuctl
from tests.support.tracking import launch, make_tenant, state_of, track_until
from tests.workloads.addresses import until_the_pool_is_full
from tests.workloads.api_calls import DEMO_QUOTA, vision_lab_ready
from tests.workloads.api_calls import launch as api_launch
from workloads.access import callback_url
from workloads.models import Workload
from workloads.objects import workload_objects_delete
from workloads.services import workload_stop
from workloads.tracking.tracker import Tracker

pytestmark = [pytest.mark.django_db, pytest.mark.timeout(120)]

S = Workload.State
POOL = ["10.20.0.10-10.20.0.11"]  # two addresses


@pytest.fixture(scope="module")
def small_pool(kubesim_factory):
    """A cluster of its own: the demo's nodes, and a default pool of two addresses."""
    server = kubesim_factory(inventory=DEMO_INVENTORY,
                             extra_args=["--lb-pool", f"default={','.join(POOL)}"])
    yield server
    from cluster.cache import cluster_cache_drop

    cluster_cache_drop()  # its watches stop before the server does
    server.stop()


@pytest.fixture
def cluster_of_two(small_pool, settings, gpu_types, cache):
    settings.KUBECONFIG = str(small_pool.kubeconfig)
    settings.PORTAL_SERVICE_EXPOSURE = "loadbalancer"
    address_pools_forget()  # another test's figures of this cluster are not this one's
    # the next test counts the pool's free addresses: what this one made is gone by then
    with cluster_objects_of_the_test(small_pool.api_client, timeout=30):
        yield small_pool


@pytest.fixture
def cache():
    from django.core.cache import cache
    cache.clear()
    yield cache
    cache.clear()


def test_the_pool_is_read_from_its_ipaddresspool(cluster_of_two):
    """kubesim publishes its pool as MetalLB does, an IPAddressPool with its counts."""
    pools = address_pools()
    assert pools.known and pools.total == 2 and pools.free == 2


def test_no_cluster_configured_is_no_count_and_refuses_nothing(settings):
    """A portal with no cluster configured (no kubeconfig, not in a pod) cannot read a pool: the
    count is unknown and a service launch is admitted, to be created once the cluster answers
    (it answered 500 to the launch and the launch page)."""
    from workloads.selectors import service_addresses

    settings.KUBECONFIG = ""
    address_pools_forget()
    assert address_pools() == address_pools(fresh=True)
    assert not address_pools().known and not service_addresses().exhausted


def test_a_running_service_without_an_address_says_the_pool_has_none(
        cluster_of_two, owner, gpu_types):  # noqa: F811 - the fixture
    tenant = make_tenant()
    notebooks = [launch(tenant, owner, gpu_types, name=f"nb{i}", template="jupyter",
                        kind="service") for i in range(3)]
    tracker = Tracker()
    waiting = until_the_pool_is_full(tracker, notebooks, addresses=2, timeout=40)
    assert waiting.reason.startswith("Running; waiting for an address: the address pool has "
                                     "none free")
    assert "no available IPs" in waiting.reason  # MetalLB's own words, as its event says
    assert waiting.url == ""
    # the pool says so too: nothing free
    assert address_pools(fresh=True).free == 0

    # one stops: its address goes to the one that waited, whose reason clears
    workload_stop(workload=next(n for n in notebooks if n.address), user=owner)
    Kube().delete("Service", next(n for n in notebooks if n.address).object_name,
                  tenant.namespace)
    track_until(tracker, lambda: bool(state_of(waiting).address), timeout=30,
                describe=lambda: f"{waiting.state} {waiting.reason!r}")
    assert waiting.reason == "" and waiting.url.startswith("http://10.20.0.1")


# --- admission: refused before submit while no address is free --------------------------------

JUPYTER = {"name": "nb", "template": "jupyter", "gpu_type": "a100", "gpu_count": 1}


@pytest.fixture
def vision_of_two(login, cluster_of_two):
    """vision-lab, provisioned on the cluster whose pool holds two addresses."""
    return vision_lab_ready(login)


def test_a_service_launch_is_refused_while_no_address_is_free(vision_of_two, api_headers,
                                                              eager_celery):
    headers = api_headers("researcher")
    for i in range(2):
        assert api_launch(headers, {**JUPYTER, "name": f"nb{i}"}).status_code == 201
    refused = api_launch(headers, {**JUPYTER, "name": "one too many"})
    assert refused.status_code == 409, refused.json()
    body = refused.json()
    assert body["code"] == "no_address_free" and body["fields"] == {}
    assert body["detail"].startswith("No external address is free for a service: the load "
                                     "balancer's pool has ")
    assert "shared gateway" in body["detail"]
    assert not Workload.objects.filter(name="one too many").exists()  # nothing changed
    # a batch job needs no address: admitted
    batch = api_launch(headers, {"name": "job", "template": "custom", "kind": "batch",
                                 "image": "busybox:1.36", "gpu_type": "a100", "gpu_count": 1})
    assert batch.status_code == 201, batch.json()


def test_the_launch_page_says_how_many_addresses_are_free_and_warns(vision_of_two, as_user,
                                                                   api_headers, eager_celery):
    page = as_user("researcher")
    shown = page.get("/workloads/new/")
    assert 'id="addresses-note"' in shown.content.decode()
    assert "2 of 2 external addresses free for services" in shown.content.decode()
    headers = api_headers("researcher")
    for i in range(2):
        assert api_launch(headers, {**JUPYTER, "name": f"nb{i}"}).status_code == 201
    text = page.get("/workloads/new/").content.decode()
    assert "No external address is free for a service" in text
    assert "A service launched now is refused" in text


def test_gpuctl_says_why_and_exits_4(live_server, keystone, cluster_of_two, eager_celery):
    env = openrc(keystone, live_server)
    code, _, err = run_gpuctl(["whoami"], env)  # records the user and the tenant
    assert code == 0, err
    vision = Tenant.objects.get(name="vision-lab")
    quota_update(tenant=vision, acting_user=None, changes=DEMO_QUOTA)
    tenant_reconcile(tenant_id=vision.pk)
    base = ["launch", "--template", "jupyter", "--gpu-type", "a100", "--gpus", "1"]
    for i in range(2):
        assert run_gpuctl([*base, "--name", f"nb{i}"], env)[0] == 0
    code, _, err = run_gpuctl([*base, "--name", "one too many"], env)
    assert code == 4, err
    assert "no_address_free" in err and "No external address is free" in err


# --- the shared-address mode: the pool no longer caps the notebooks -----------------------------

DOMAIN = "apps.gpu-portal.test"


def test_behind_the_shared_gateway_a_burst_past_the_pool_all_run_with_a_url(
        vision_of_two, api_headers, eager_celery, settings):
    """Five notebooks on a pool of two: each gets a ClusterIP Service and an Ingress for its
    own host name, and runs with its URL; the pool is not touched. The proxy's callback
    follows the host name."""
    settings.PORTAL_SERVICE_EXPOSURE = "shared"
    settings.PORTAL_SERVICE_DOMAIN = DOMAIN
    settings.PORTAL_SERVICE_SCHEME = "https"
    settings.PORTAL_INGRESS_CLASS = "gpu-portal"
    quota_update(tenant=vision_of_two, acting_user=None,
                 changes={"gpus_total": 8, "gpus_by_type": {"a100": 8}})
    headers = api_headers("researcher")
    ids = []
    for i in range(5):
        response = api_launch(headers, {**JUPYTER, "name": f"nb{i}"})
        assert response.status_code == 201, response.json()
        ids.append(response.json()["id"])
    notebooks = list(Workload.objects.filter(pk__in=ids).order_by("pk"))
    track_until(Tracker(), lambda: all(state_of(n).state == S.RUNNING and n.url
                                       for n in notebooks), timeout=40,
                describe=lambda: repr([(n.state, n.address, n.reason) for n in notebooks]))
    kube = Kube()
    for notebook in notebooks:
        host = f"w-{notebook.pk}.{DOMAIN}"
        assert notebook.address == host and notebook.reason == ""
        assert notebook.url == f"https://{host}/lab"
        service = kube.get("Service", notebook.object_name, vision_of_two.namespace)
        assert service["spec"]["type"] == "ClusterIP"
        assert service["status"].get("loadBalancer", {}) == {}
        ingress = kube.get("Ingress", notebook.object_name, vision_of_two.namespace)
        assert ingress["spec"]["rules"][0]["host"] == host
        assert ingress["spec"]["ingressClassName"] == "gpu-portal"
        assert ingress["metadata"]["labels"]["gpu-portal.io/workload-id"] == str(notebook.pk)
        # the login's answer comes back to its own host name, as the portal's OIDC provider
        # expects (access/oidc.py: the redirect URI is callback_url)
        assert callback_url(notebook) == f"https://{host}/oauth2/callback"
        deployment = kube.get("Deployment", notebook.object_name, vision_of_two.namespace)
        proxy = deployment["spec"]["template"]["spec"]["containers"][1]
        assert f"--redirect-url=https://{host}/oauth2/callback" in proxy["args"]
        assert "--cookie-secure=true" in proxy["args"]
    assert address_pools(fresh=True).free == 2  # no address of the pool taken

    # deleted with the workload: its Ingress too
    stopped = notebooks[0]
    workload_objects_delete(stopped)
    assert kube.get("Ingress", stopped.object_name, vision_of_two.namespace) is None


@pytest.mark.parametrize(("exposure", "domain", "scheme", "ids"), [
    ("loadbalancer", "", "https", []),
    ("shared", "apps.example.org", "https", []),
    ("shared", "apps.localhost", "http", []),
    ("nodeport", "", "https", ["workloads.E002"]),
    ("shared", "", "https", ["workloads.E003"]),
    ("shared", "Apps_Example.org", "https", ["workloads.E003"]),
    ("shared", "a" * 40 + ".example.org", "https", ["workloads.E003"]),  # w-<id>. would not fit
    ("shared", "apps.example.org", "ftp", ["workloads.E004"]),
    ("shared", "apps.example.org", "https+proxy-tls", ["workloads.E005"]),
])
def test_the_exposure_settings_are_checked_at_start(settings, exposure, domain, scheme, ids):
    from workloads.checks import service_exposure_valid

    scheme, _, tls = scheme.partition("+")
    settings.PORTAL_AUTH_PROXY_TLS_SECRET = "workloads-tls" if tls else ""
    settings.PORTAL_SERVICE_EXPOSURE = exposure
    settings.PORTAL_SERVICE_DOMAIN = domain
    settings.PORTAL_SERVICE_SCHEME = scheme
    assert [error.id for error in service_exposure_valid(None)] == ids
