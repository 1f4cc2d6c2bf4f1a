"""Services past the address pool (issue 23, item 7), on a kubesim whose pool holds two
addresses: the workload that got none says why, the launch is refused before submit while none
is free (API, page, gpuctl), and an address freed goes to the one that waited."""

from __future__ import annotations

import pytest

from portal.kube.client import Kube
from portal.cluster.addresses import address_pools
from portal.workloads.models import Workload
from portal.workloads.services import workload_stop
from portal.workloads.tracking.tracker import Tracker
from tests.fixtures.kubesim import DEMO_INVENTORY
from tests.fixtures.portal import remove_workload_objects
from tenants.models import Tenant
from tenants.provisioning import tenant_reconcile
from tenants.services import quota_update
from tests.gpuctl.test_cli import openrc
from tests.gpuctl.test_cli import run as run_gpuctl
from tests.workloads.api_calls import DEMO_QUOTA, vision_lab_ready
from tests.workloads.api_calls import launch as api_launch
from tests.workloads.test_tracking import (  # noqa: F401 - owner: the fixture
    launch,
    make_tenant,
    owner,
    state_of,
    track_until,
)

pytestmark = [pytest.mark.django_db, pytest.mark.timeout(120)]

S = Workload.State
POOL = ["10.20.0.10-10.20.0.11"]  # two addresses


@pytest.fixture(scope="module")
def small_pool(kubesim_factory):
    """A cluster of its own: the demo's nodes, and a default pool of two addresses."""
    server = kubesim_factory(inventory=DEMO_INVENTORY,
                             extra_args=["--lb-pool", f"default={','.join(POOL)}"])
    yield server
    from portal.cluster.cache import cluster_cache_drop

    cluster_cache_drop()  # its watches stop before the server does
    server.stop()


@pytest.fixture
def cluster_of_two(small_pool, settings, gpu_types, cache):
    settings.KUBECONFIG = str(small_pool.kubeconfig)
    settings.PORTAL_SERVICE_EXPOSURE = "loadbalancer"
    yield small_pool
    with small_pool.api_client() as client:
        remove_workload_objects(Kube(client))


@pytest.fixture
def cache():
    from django.core.cache import cache
    cache.clear()
    yield cache
    cache.clear()


def test_the_pool_is_read_from_its_ipaddresspool(cluster_of_two, owner, gpu_types):
    """kubesim publishes its pool as MetalLB does, an IPAddressPool with its counts."""
    pools = address_pools()
    assert pools.known and pools.total == 2 and pools.free == 2


def test_a_running_service_without_an_address_says_the_pool_has_none(
        cluster_of_two, owner, gpu_types):
    tenant = make_tenant()
    notebooks = [launch(tenant, owner, gpu_types, name=f"nb{i}", template="jupyter",
                        kind="service") for i in range(3)]
    tracker = Tracker()

    def settled() -> bool:
        rows = [state_of(n) for n in notebooks]
        return (all(n.state == S.RUNNING for n in rows)
                and sum(1 for n in rows if n.address) == 2
                and any("none free" in n.reason for n in rows))

    track_until(tracker, settled, timeout=40,
                describe=lambda: repr([(n.state, n.address, n.reason) for n in notebooks]))
    (waiting,) = [n for n in notebooks if not n.address]
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


def test_the_launch_page_warns_and_refuses_when_no_address_is_free(vision_of_two, as_user,
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
