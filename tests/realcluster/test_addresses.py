"""Services past an address pool of two on the real control plane, with MetalLB's own
controller: the pool's free addresses as MetalLB counts them in its
IPAddressPool's status, the reason of the service that got none in MetalLB's words, and a
launch refused while none is free."""

from __future__ import annotations

import pytest
from kubernetes import client as k8s

from cluster.addresses import address_pools
from stack.k8s.build import apply_object
from stack.k8s.metallb import NAMESPACE as METALLB_NAMESPACE
from tests.support.tracking import launch, owner  # noqa: F401 - owner: the fixture
from tests.workloads.addresses import until_the_pool_is_full
from tests.workloads.api_calls import launch as api_launch
from tests.workloads.api_calls import vision_lab_ready
from workloads.tracking.tracker import Tracker

pytestmark = [pytest.mark.django_db, pytest.mark.realcluster, pytest.mark.timeout(300)]

POOL = "reason-two"
POOL_ADDRESSES = ["192.168.3.10-192.168.3.11"]  # assigned by MetalLB, never sent to


@pytest.fixture
def pool_of_two(real_cluster, cluster, settings):
    pool = {"apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
            "metadata": {"name": POOL, "namespace": METALLB_NAMESPACE},
            "spec": {"addresses": POOL_ADDRESSES, "autoAssign": False}}
    with real_cluster.api_client() as api:
        apply_object(api, pool)
    settings.PORTAL_LB_ADDRESS_POOL = POOL
    settings.PORTAL_SERVICE_EXPOSURE = "loadbalancer"
    yield POOL
    with real_cluster.api_client() as api:
        k8s.CustomObjectsApi(api).delete_namespaced_custom_object(
            "metallb.io", "v1beta1", METALLB_NAMESPACE, "ipaddresspools", POOL)


def test_past_the_pool_metallbs_counts_its_words_and_a_refusal(pool_of_two, login, gpu_types,
                                                               owner, api_headers,  # noqa: F811
                                                               eager_celery):
    tenant = vision_lab_ready(login)
    assert address_pools(fresh=True).free == 2  # MetalLB has read the pool
    notebooks = [launch(tenant, owner, gpu_types, name=f"nb{i}", template="jupyter",
                        kind="service") for i in range(3)]
    waiting = until_the_pool_is_full(Tracker(), notebooks, addresses=2, timeout=120)
    assert waiting.reason.startswith("Running; waiting for an address: the address pool has "
                                     "none free (the load balancer: Failed to allocate IP for ")
    # MetalLB's own words, from a pool the Service names (v0.15.2)
    assert '["<nil>"] is not allowed in config' in waiting.reason
    pools = address_pools(fresh=True)
    assert (pools.names, pools.total, pools.free) == ((POOL,), 2, 0)

    refused = api_launch(api_headers("researcher"), {"name": "one too many",
                                                     "template": "jupyter",
                                                     "gpu_type": "a100", "gpu_count": 1})
    assert refused.status_code == 409 and refused.json()["code"] == "no_address_free"
