"""A GPU type claimed through DRA on the real control plane: the launch's ResourceClaimTemplate
gives its pod a claim, the real kube-scheduler allocates it devices from the ResourceSlices the
DRA addon publishes for its node pool (stack/k8s/dra.py, as NVIDIA's kubelet plugin would) and
binds the pod on their node, KWOK runs it; the quota counts it as any other type's units; a
claim beyond the devices leaves its pod Pending with the scheduler's reason. The H100 node's
GPUs are partitionable (shared counters): a whole GPU and its MIG profiles exclude each other,
at the scheduler and in the portal's figures."""

import pytest
from kubernetes import client as k8s

from kube.discovery import api_served
from tenants.provisioning import tenant_reconcile
from tenants.services import quota_update
from tests.support.cluster import portal_on
from tests.support.database import dra_gpu_type, dra_mig_gpu_type
from tests.support.journeys import JUPYTER, track_until, vision  # noqa: F401 - a fixture
from tests.support.waiting import eventually
from tests.workloads.api_calls import launch, post
from workloads.models import Workload
from workloads.objects import workload_objects_create

pytestmark = [pytest.mark.django_db, pytest.mark.realcluster, pytest.mark.timeout(180)]


@pytest.fixture
def cluster(dra_cluster, settings):
    """The portal on the control plane with the DRA addon (tests/fixtures/realcluster.py)."""
    with portal_on(dra_cluster, settings) as view:
        yield view

NODE = "gpu-a100-dra-1"  # the addon's pool: two NVIDIA A100-SXM4-80GB devices of 80Gi


def pods_of(api, namespace: str, workload_id: int) -> list:
    return k8s.CoreV1Api(api).list_namespaced_pod(
        namespace, label_selector=f"gpu-portal.io/workload-id={workload_id}").items


def claims_of(api, namespace: str, workload_id: int) -> list:
    return k8s.ResourceV1Api(api).list_namespaced_resource_claim(
        namespace, label_selector=f"gpu-portal.io/workload-id={workload_id}").items


def unschedulable(api, namespace: str, workload_id: int) -> str | None:
    """The scheduler's message on the workload's pod that it cannot place, or None yet."""
    pods = pods_of(api, namespace, workload_id)
    conditions = (pods[0].status.conditions or []) if pods else []
    return next((c.message for c in conditions if c.type == "PodScheduled"
                 and c.status == "False" and c.reason == "Unschedulable"), None)


def test_a_dra_launch_is_allocated_by_the_real_scheduler_and_counted(vision, api_headers,
                                                                     eager_celery, cluster):
    from kube.client import Kube

    assert api_served("resource.k8s.io/v1", Kube(), fresh=True)  # 1.37 serves it by default
    dra_gpu_type()
    quota_update(tenant=vision, acting_user=None, changes={
        "gpus_total": 3, "gpus_by_type": {"a100": 4, "a100-dra": 3}})
    tenant_reconcile(tenant_id=vision.pk)
    headers = api_headers("researcher")
    both = launch(headers, {**JUPYTER, "name": "both", "gpu_type": "a100-dra", "gpu_count": 2})
    assert both.status_code == 201, both.json()
    workload = Workload.objects.get(pk=both.json()["id"])
    api = cluster.api_client()
    template = k8s.ResourceV1Api(api).read_namespaced_resource_claim_template(
        workload.object_name, vision.namespace)
    (request,) = template.spec.spec.devices.requests
    # the type's own DeviceClass (made by the tenant's reconcile): the driver's class narrowed
    # to the type's board and memory, so that the claim itself asks nothing more
    assert (request.exactly.device_class_name, request.exactly.count) == (
        "a100-dra.gpu-portal.io", 2)
    assert request.exactly.selectors is None
    klass = k8s.ResourceV1Api(api).read_device_class("a100-dra.gpu-portal.io")
    assert "'NVIDIA A100-SXM4-80GB'" in klass.spec.selectors[0].cel.expression
    deployment = k8s.AppsV1Api(api).read_namespaced_deployment(workload.object_name,
                                                               vision.namespace)
    assert deployment.spec.template.spec.node_selector is None

    def allocated() -> set | None:
        claims = claims_of(api, vision.namespace, workload.pk)
        allocation = claims[0].status.allocation if claims and claims[0].status else None
        if allocation is None:
            return None
        return {(r.driver, r.pool, r.device) for r in allocation.devices.results}

    devices = eventually(allocated, timeout=30, message="the claim allocated")
    assert devices == {("gpu.nvidia.com", NODE, "gpu-0"), ("gpu.nvidia.com", NODE, "gpu-1")}

    def running() -> bool:
        pods = pods_of(api, vision.namespace, workload.pk)
        return bool(pods) and pods[0].spec.node_name == NODE and pods[0].status.phase == "Running"

    eventually(running, timeout=30, message="its pod bound to the claim's node and running")
    # no device is left: the next claim waits, its pod Pending with the scheduler's reason
    more = launch(headers, {**JUPYTER, "name": "more", "gpu_type": "a100-dra", "gpu_count": 1})
    assert more.status_code == 201, more.json()
    waiting = Workload.objects.get(pk=more.json()["id"])

    reason = eventually(lambda: unschedulable(api, vision.namespace, waiting.pk), timeout=30,
                        message="the pod unschedulable")
    # e.g. "0/10 nodes are available: 10 cannot allocate all claims. preemption: …"
    assert "cannot allocate all claims" in reason, reason
    assert pods_of(api, vision.namespace, waiting.pk)[0].status.phase == "Pending"
    # the workload's page and API say it in the scheduler's words, as for any other type
    tracked = track_until(waiting.pk, lambda w: w.reason == reason)
    assert tracked.state == "pending"
    # the namespace's ResourceQuota counts the devices its claims take, per device class: the
    # type's own
    key = "a100-dra.gpu-portal.io.deviceclass.resource.k8s.io/devices"

    def quota_used() -> dict:
        quota = k8s.CoreV1Api(api).read_namespaced_resource_quota("gpu-portal-quota",
                                                                  vision.namespace)
        return {"hard": quota.status.hard.get(key), "used": quota.status.used.get(key)}

    eventually(lambda: quota_used() == {"hard": "3", "used": "3"}, timeout=30,
               message=lambda: f"the claims counted: {quota_used()}")
    # counted as every type's units × its fraction (1): 3 of the 3 GPUs in all are taken
    refused = launch(headers, {**JUPYTER, "name": "one-more", "gpu_type": "a100"})
    assert refused.status_code == 403, refused.json()
    assert "uses 3 of 3 GPUs in all" in refused.json()["detail"]


def test_a_dra_launchs_objects_are_adopted_and_its_devices_freed_by_stop(vision, api_headers,
                                                                        eager_celery, cluster):
    dra_gpu_type()
    quota_update(tenant=vision, acting_user=None, changes={"gpus_by_type": {"a100-dra": 4}})
    tenant_reconcile(tenant_id=vision.pk)
    headers = api_headers("researcher")
    first = Workload.objects.get(pk=launch(headers, {
        **JUPYTER, "name": "first", "gpu_type": "a100-dra", "gpu_count": 2}).json()["id"])
    # a retried create makes nothing twice: the claim template is adopted as every object
    assert workload_objects_create(first) == []
    second = Workload.objects.get(pk=launch(headers, {
        **JUPYTER, "name": "second", "gpu_type": "a100-dra", "gpu_count": 2}).json()["id"])
    api = cluster.api_client()
    eventually(lambda: pods_of(api, vision.namespace, second.pk) and
               pods_of(api, vision.namespace, second.pk)[0].status.phase == "Pending",
               timeout=30, message="the second waits for devices")
    assert post(f"/api/v1/workloads/{first.pk}/stop/", headers).status_code == 202
    resource = k8s.ResourceV1Api(api)
    names = [t.metadata.name for t in
             resource.list_namespaced_resource_claim_template(vision.namespace).items]
    assert names == [second.object_name]
    # its claim went with its pod: the devices are the second's now
    workload = track_until(second.pk, lambda w: w.state == "running")
    assert workload.node == NODE
    claims = claims_of(api, vision.namespace, second.pk)
    assert {r.device for r in claims[0].status.allocation.devices.results} == {"gpu-0", "gpu-1"}
    eventually(lambda: claims_of(api, vision.namespace, first.pk) == [], timeout=30,
               message="the first's claim deleted with its pod")


def dra_row(headers: dict) -> dict:
    from django.test import Client

    rows = Client().get("/api/v1/gpu-types/", **headers).json()
    return next(r for r in rows if r["slug"] == "a100-dra")


def test_a_dra_types_capacity_is_its_devices_less_the_allocated_ones(vision, api_headers,
                                                                       eager_celery, login,
                                                                       cluster):
    from calendars.selectors import type_nodes

    dra = dra_gpu_type()
    quota_update(tenant=vision, acting_user=None, changes={"gpus_by_type": {"a100-dra": 4}})
    tenant_reconcile(tenant_id=vision.pk)
    headers = api_headers("researcher")
    # the calendar (maintenance windows, reservations) counts the same devices per node
    assert type_nodes(dra) == {NODE: 2}
    figures = ("capacity", "allocated", "free", "largest_node", "nodes")
    assert {k: dra_row(headers)[k] for k in figures} == {
        "capacity": 2, "allocated": 0, "free": 2, "largest_node": 2, "nodes": 1}
    # a claim no node's devices can satisfy is refused at once, as any type's request
    too_many = launch(headers, {**JUPYTER, "name": "three", "gpu_type": "a100-dra",
                                "gpu_count": 3})
    assert too_many.status_code == 400, too_many.json()
    assert "No a100-dra node has 3 GPUs (the largest has 2)" in str(too_many.json())
    one = Workload.objects.get(pk=launch(headers, {
        **JUPYTER, "name": "one", "gpu_type": "a100-dra", "gpu_count": 1}).json()["id"])
    api = cluster.api_client()
    eventually(lambda: claims_of(api, vision.namespace, one.pk) and
               claims_of(api, vision.namespace, one.pk)[0].status.allocation,
               timeout=30, message="its claim allocated")
    eventually(lambda: {k: dra_row(headers)[k] for k in ("allocated", "free")} ==
               {"allocated": 1, "free": 1}, timeout=30,
               message=lambda: f"the device counted: {dra_row(headers)}")
    # the admin's GPU types page: which device on which node, and which workload holds it
    (held,) = [r.device for r in
               claims_of(api, vision.namespace, one.pk)[0].status.allocation.devices.results]
    page = login("admin").get("/admin/gpu-types/").content.decode()
    assert 'id="devices-a100-dra"' in page
    holder = page.split(f'data-device="{NODE}/{held}"', 1)[1].split("</tr>", 1)[0]
    assert f"(workload {one.pk})" in holder and f"{vision.namespace}/" in holder
    free = "gpu-1" if held == "gpu-0" else "gpu-0"
    assert ">free<" in page.split(f'data-device="{NODE}/{free}"', 1)[1].split("</tr>", 1)[0]


def test_each_dra_types_device_class_follows_the_catalogue(vision, eager_celery, cluster,
                                                           django_capture_on_commit_callbacks):
    """The tenants' reconcile keeps a DeviceClass per DRA type where the cluster serves
    resource.k8s.io/v1: made with the type, changed with its product, removed when it is no
    longer a DRA type; the driver's own classes are left alone."""
    from catalogue.services import gpu_type_update
    from kube.client import Kube

    a100, h100 = dra_gpu_type(), dra_gpu_type("h100")
    tenant_reconcile(tenant_id=vision.pk)
    kube = Kube()

    def expression(name: str) -> str | None:
        found = kube.get("DeviceClass", name)
        return found["spec"]["selectors"][0]["cel"]["expression"] if found else None

    assert "'NVIDIA A100-SXM4-80GB'" in (expression("a100-dra.gpu-portal.io") or "")
    assert "'NVIDIA H100 80GB HBM3'" in (expression("h100-dra.gpu-portal.io") or "")
    # a change of the type reaches its class with the reconcile it sends (eager here)
    with django_capture_on_commit_callbacks(execute=True):
        gpu_type_update(gpu_type=h100, acting_user=None,
                        changes={"product": "NVIDIA H100 PCIe"})
    assert "'NVIDIA H100 PCIe'" in (expression("h100-dra.gpu-portal.io") or "")
    with django_capture_on_commit_callbacks(execute=True):
        gpu_type_update(gpu_type=a100, acting_user=None, changes={
            "sharing": "exclusive", "device_class": "", "product": ""})
    assert expression("a100-dra.gpu-portal.io") is None
    assert expression("gpu.nvidia.com") is not None  # the driver's


H100_NODE = "gpu-h100-dra-1"  # two partitionable NVIDIA H100 80GB HBM3


def allocated_devices(api, namespace: str, workload_id: int) -> list[str] | None:
    claims = claims_of(api, namespace, workload_id)
    allocation = claims[0].status.allocation if claims and claims[0].status else None
    return [r.device for r in allocation.devices.results] if allocation else None


def allocations(api, namespace: str, *workload_ids: int) -> list[list[str]] | None:
    """Each workload's allocated devices, once all of them have some."""
    found = [allocated_devices(api, namespace, workload_id) for workload_id in workload_ids]
    return found if all(found) else None  # type: ignore[return-value]


def pod_states(api, namespace: str, *workload_ids: int) -> dict:
    """Each workload's pods as a failed wait should describe them: phase, node, the
    scheduler's condition, and the devices its claim holds."""
    return {workload_id: [(p.metadata.name, p.status.phase, p.spec.node_name,
                           [(c.type, c.status, c.reason, c.message)
                            for c in p.status.conditions or []])
                          for p in pods_of(api, namespace, workload_id)]
            + [allocated_devices(api, namespace, workload_id)]
            for workload_id in workload_ids}


def figures_of(headers: dict, *slugs: str) -> dict:
    from django.test import Client

    rows = {r["slug"]: r for r in Client().get("/api/v1/gpu-types/", **headers).json()}
    return {slug: {k: rows[slug][k] for k in ("capacity", "allocatable", "allocated", "free")}
            for slug in slugs}


def test_a_partitionable_gpus_whole_and_mig_claims_exclude_each_other(vision, api_headers,
                                                                     eager_celery, login,
                                                                     cluster):
    dra_gpu_type("h100")
    dra_mig_gpu_type("1g.10gb")
    quota_update(tenant=vision, acting_user=None, changes={
        "gpus_total": 4, "gpus_by_type": {"h100-dra": 2, "h100-1g-10gb-dra": 7}})
    tenant_reconcile(tenant_id=vision.pk)
    headers = api_headers("researcher")
    api = cluster.api_client()
    part = Workload.objects.get(pk=launch(headers, {
        **JUPYTER, "name": "part", "gpu_type": "h100-1g-10gb-dra"}).json()["id"])
    (device,) = eventually(lambda: allocated_devices(api, vision.namespace, part.pk),
                           timeout=30, message="the MIG claim allocated")
    gpu, _, profile = device.partition("-mig-")
    assert profile.startswith("1g-10gb-"), device  # its profile's device, of one GPU
    other = "gpu-1" if gpu == "gpu-0" else "gpu-0"
    # its GPU can no longer be had whole; its other slices can still be had as profiles
    both = ("h100-dra", "h100-1g-10gb-dra")
    eventually(lambda: figures_of(headers, *both) == {
        "h100-dra": {"capacity": 2, "allocatable": 1, "allocated": 0, "free": 1},
        "h100-1g-10gb-dra": {"capacity": 14, "allocatable": 14, "allocated": 1, "free": 13}},
        timeout=30, message=lambda: f"the counters counted: {figures_of(headers, *both)}")
    # a claim of both GPUs whole cannot be had: the scheduler keeps to the counters
    whole = Workload.objects.get(pk=launch(headers, {
        **JUPYTER, "name": "whole", "gpu_type": "h100-dra", "gpu_count": 2}).json()["id"])

    reason = eventually(lambda: unschedulable(api, vision.namespace, whole.pk), timeout=30,
                        message=lambda: "the whole-GPU pod unschedulable: "
                        f"{pod_states(api, vision.namespace, whole.pk, part.pk)}")
    assert "cannot allocate all claims" in reason, reason
    assert post(f"/api/v1/workloads/{whole.pk}/stop/", headers).status_code == 202
    # one GPU whole is the other GPU
    one = Workload.objects.get(pk=launch(headers, {
        **JUPYTER, "name": "one", "gpu_type": "h100-dra", "gpu_count": 1}).json()["id"])
    # read beside the MIG claim's allocation as it is then: what must hold is that the two
    # never share a GPU, whichever GPU the MIG claim holds by then
    mine, theirs = eventually(lambda: allocations(api, vision.namespace, one.pk, part.pk),
                              timeout=30, message="the whole-GPU claim allocated")
    gpu = theirs[0].partition("-mig-")[0]
    other = "gpu-1" if gpu == "gpu-0" else "gpu-0"
    assert mine == [other], (mine, theirs)
    eventually(lambda: figures_of(headers, *both) == {
        "h100-dra": {"capacity": 2, "allocatable": 1, "allocated": 1, "free": 0},
        "h100-1g-10gb-dra": {"capacity": 14, "allocatable": 7, "allocated": 1, "free": 6}},
        timeout=30, message=lambda: f"the counters counted: {figures_of(headers, *both)}")
    admin = login("admin")
    # the admin's node layout: how each GPU is carved now
    calendar = admin.get("/admin/calendar/").content.decode()
    row = calendar.split(f'data-node="{H100_NODE}"', 1)[1].split("</tr>", 1)[0]
    assert f"{gpu} 1 × 1g.10gb in use; {other} whole in use" in row, row
    assert "2 GPUs, or parts of them: 14 × 1g.10gb, 4 × 3g.40gb" in row, row
    # the GPU types page: the whole GPU the MIG device is carved from is not free
    page = admin.get("/admin/gpu-types/").content.decode()
    devices = page.split('id="devices-h100-dra"', 1)[1].split("</section>", 1)[0]
    assert "data-blocked" in devices.split(f'data-device="{H100_NODE}/{gpu}"', 1)[1].split(
        "</tr>", 1)[0]
