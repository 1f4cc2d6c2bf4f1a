"""Every service template with the authenticating proxy in front of it, on the real
control plane: created by the portal's own ServiceAccount in a tenant namespace the portal
provisioned, under that namespace's Pod Security enforce level ("baseline": the tenant may run
templates that may run as root, DIGITS among them); the real ReplicaSet controller makes each
pod (no FailedCreate) and KWOK runs it. The proxy container on
its own passes "restricted", even in the pod of an application that runs as root.

The specs are those of the pure manifests' tests (tests/workloads/test_manifests.py), moved into
the tenant's namespace."""

from __future__ import annotations

import dataclasses

import pytest
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException

from access.proxy import PROXY_CONTAINER, make_proxy_container, make_proxy_volumes
from kube.client import Kube
from tenants.models import Quota, Tenant
from tenants.provisioning import tenant_reconcile
from tests.support.manifests import DIGITS, SERVICES, proxy_for
from tests.support.provisioning import tenant  # noqa: F401 - the fixture
from tests.support.waiting import eventually
from workloads.manifests import (
    SERVICE_ACCOUNT_NAME,
    WorkloadSpec,
    make_pod_template,
    workload_objects,
)

pytestmark = [pytest.mark.django_db, pytest.mark.realcluster, pytest.mark.timeout(180)]

WAIT_SECONDS = 60


def in_namespace(spec: WorkloadSpec, namespace: str, workload_id: int) -> WorkloadSpec:
    """The spec in another namespace, under a name of its own; small, so that four fit."""
    name = f"wl-{workload_id}-{spec.template}"
    return dataclasses.replace(
        spec, workload_id=workload_id, name=name, namespace=namespace, cpu="1", memory="2Gi",
        home_claim=None,  # no PersistentVolume here: the pod would wait for it unscheduled
        proxy=dataclasses.replace(spec.proxy, secret_name=name,
                                  client_id=proxy_for(name, spec.port).client_id))


def test_every_service_template_with_its_proxy_is_admitted_and_runs(tenant, cluster):  # noqa: F811
    Quota.objects.filter(tenant=tenant).update(gpus_total=len(SERVICES))  # one GPU each
    # DIGITS may run as root: a tenant an admin allowed root templates,
    # whose namespace enforces "baseline" (tests/realcluster/test_pod_security.py: the others
    # under "restricted")
    Tenant.objects.filter(pk=tenant.pk).update(allow_root_templates=True)
    tenant_reconcile(tenant_id=tenant.pk)
    ns = tenant.namespace
    core = k8s.CoreV1Api(cluster.api_client())
    assert core.read_namespace(ns).metadata.labels["pod-security.kubernetes.io/enforce"] == \
        "baseline"
    specs = [in_namespace(spec, ns, 9100 + i) for i, spec in enumerate(SERVICES.values())]
    kube = Kube()  # the portal's ServiceAccount, as workload_objects_create creates them
    for spec in specs:
        for obj in workload_objects(spec):
            kube.create(obj)

    apps = k8s.AppsV1Api(cluster.api_client())
    for spec in specs:
        def ready(spec=spec):
            pods = core.list_namespaced_pod(
                ns, label_selector=f"gpu-portal.io/workload-id={spec.workload_id}").items
            return pods if pods and all(
                p.status.phase == "Running" and p.status.container_statuses
                and all(c.ready for c in p.status.container_statuses) for p in pods) else None

        (pod,) = eventually(ready, timeout=WAIT_SECONDS, interval=0.2,
                            message=f"{spec.template}'s pod is not ready")
        assert [c.name for c in pod.spec.containers] == ["app", PROXY_CONTAINER]
        # the Service leads to the proxy: its targetPort "http" is the proxy's port
        service = core.read_namespaced_service(spec.name, ns)
        assert service.spec.ports[0].port == spec.port
        assert service.spec.ports[0].target_port == "http"
        (proxy,) = [c for c in pod.spec.containers if c.name == PROXY_CONTAINER]
        assert [p.name for p in proxy.ports] == ["http"]
        (replica_set,) = apps.list_namespaced_replica_set(
            ns, label_selector=f"gpu-portal.io/workload-id={spec.workload_id}").items
        assert not [c for c in replica_set.status.conditions or []
                    if c.type == "ReplicaFailure"], spec.template
    refused = [e.message for e in core.list_namespaced_event(ns).items
               if e.reason == "FailedCreate"]
    assert refused == []


@pytest.fixture
def restricted_namespace(real_namespace, real_cluster):
    """A namespace that enforces Pod Security "restricted", with the workloads' ServiceAccount
    (the ServiceAccount admission plugin refuses a pod whose account is missing)."""
    with real_cluster.api_client() as api_client:
        core = k8s.CoreV1Api(api_client)
        core.patch_namespace(real_namespace, {"metadata": {"labels": {
            "pod-security.kubernetes.io/enforce": "restricted",
            "pod-security.kubernetes.io/enforce-version": "latest"}}})
        core.create_namespaced_service_account(real_namespace, {
            "metadata": {"name": SERVICE_ACCOUNT_NAME}, "automountServiceAccountToken": False})
    return real_namespace


def dry_run_pod(real_cluster, namespace: str, template: dict):
    """The pod through the API server's whole admission chain, stored nowhere: the pod as
    admitted (ApiException when it is refused)."""
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "proxy-check", **template["metadata"]},
           "spec": template["spec"]}
    with real_cluster.api_client() as api_client:
        return k8s.CoreV1Api(api_client).create_namespaced_pod(namespace, pod, dry_run="All")


def test_the_proxy_alone_passes_pod_security_restricted(real_cluster, restricted_namespace):
    # in the pod of DIGITS, which runs as root: the pod asks nothing of its containers but
    # seccomp, so the proxy must be restricted by its own securityContext
    spec = dataclasses.replace(DIGITS, namespace=restricted_namespace)
    template = make_pod_template(spec)
    template["spec"]["containers"] = [make_proxy_container(spec.proxy)]
    template["spec"]["volumes"] = make_proxy_volumes(spec.proxy)
    admitted = dry_run_pod(real_cluster, restricted_namespace, template)
    assert admitted.metadata.namespace == restricted_namespace
    assert [c.name for c in admitted.spec.containers] == ["auth-proxy"]


def test_the_restricted_check_can_fail(real_cluster, restricted_namespace):
    """Guards the test above: the whole DIGITS pod (its application runs as root) is refused
    by the same check, or "passes restricted" would mean nothing."""
    template = make_pod_template(dataclasses.replace(DIGITS, namespace=restricted_namespace))
    with pytest.raises(ApiException) as refused:
        dry_run_pod(real_cluster, restricted_namespace, template)
    assert refused.value.status == 403 and "restricted" in refused.value.body
