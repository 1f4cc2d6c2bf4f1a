"""Datasets on the real control plane, as the portal's own ServiceAccount: a dataset's
PersistentVolume and claim in a project (what a launch that mounts it makes first) are bound by
the real PV controller (the volume pre-bound by its claimRef, no class); a pod mounting the
claim read-only is admitted under Pod Security "restricted" (which would refuse the NFS
export inline) and scheduled by the real scheduler; withdrawing the dataset deletes both, as
the portal's account."""

from __future__ import annotations

import dataclasses

import pytest
from django.contrib.auth import get_user_model
from django.test import TestCase
from kubernetes import client as k8s

from kube.client import Kube, KubeRefused
from storage.manifests import DatasetClaimSpec, make_dataset_claim, make_dataset_volume
from storage.services import dataset_claims_delete, dataset_create, dataset_delete
from tenants.provisioning import tenant_reconcile
from tests.support.manifests import CUSTOM_BATCH
from tests.support.provisioning import tenant  # noqa: F401 - a fixture
from tests.support.waiting import eventually
from workloads.manifests import PodMount, make_job
from workloads.mounts import ResolvedMount, dataset_claim_spec

pytestmark = [pytest.mark.django_db, pytest.mark.realcluster, pytest.mark.timeout(240)]


def test_a_datasets_volume_is_bound_by_the_pv_controller_and_mounted_read_only(cluster, tenant):
    admin = Kube(cluster.api_client())
    owner = get_user_model().objects.create(username="id-ann", keystone_user_id="id-ann",
                                            name="ann")
    with TestCase.captureOnCommitCallbacks(execute=False):
        dataset = dataset_create(user=owner, name="imagenet", description="", size_gib=150,
                                 kind="nfs", source={"server": "nfs.example.org",
                                                     "path": "/exports/imagenet"},
                                 open_to_all=False, tenants=[tenant])
    tenant_reconcile(tenant_id=tenant.pk)  # restricted, and room for the dataset's claim
    namespace = admin.get("Namespace", tenant.namespace)
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"

    frozen = ResolvedMount(dataset=dataset, path="/datasets/imagenet",
                           read_only=True).as_spec(tenant)
    spec = dataset_claim_spec(frozen, tenant)
    portal = Kube()  # the portal's ServiceAccount: what the create task does
    portal.create(make_dataset_volume(spec))
    portal.create(make_dataset_claim(spec))

    def bound() -> dict:
        claim = admin.get("PersistentVolumeClaim", spec.claim_name, tenant.namespace)
        assert claim and claim["status"].get("phase") == "Bound", claim and claim["status"]
        return claim

    claim = eventually(bound, timeout=60, message="the PV controller did not bind the claim")
    assert claim["spec"]["volumeName"] == spec.volume_name
    assert claim["status"]["accessModes"] == ["ReadOnlyMany"]
    volume = admin.get("PersistentVolume", spec.volume_name)
    assert volume["spec"]["claimRef"]["uid"] == claim["metadata"]["uid"]
    assert volume["spec"]["nfs"]["readOnly"] is True

    job = dataclasses.replace(
        CUSTOM_BATCH, workload_id=900002, name="wl-900002-dataset", namespace=tenant.namespace,
        project_id=tenant.keystone_project_id, gpu_count=0, node_selector=(), cpu="1",
        memory="1Gi", run_as_non_root=True, run_as_user=1000, image="busybox:1.36",
        command=("sh", "-c", "ls /datasets/imagenet"), args=(),
        gpu_resource="nvidia.com/gpu",
        mounts=(PodMount(claim=spec.claim_name, path="/datasets/imagenet", read_only=True),))
    portal.create(make_job(job))  # admitted by the real server under "restricted"
    core = k8s.CoreV1Api(cluster.api_client())

    def scheduled():
        pods = core.list_namespaced_pod(tenant.namespace,
                                        label_selector="gpu-portal.io/workload-id=900002").items
        assert pods and pods[0].spec.node_name, [p.status for p in pods]
        return pods[0]

    pod = eventually(scheduled, timeout=60, message="the pod mounting the dataset was not "
                                                    "scheduled")
    [mounted] = [v for v in pod.spec.volumes if v.persistent_volume_claim]
    assert (mounted.persistent_volume_claim.claim_name,
            mounted.persistent_volume_claim.read_only) == (spec.claim_name, True)
    assert any(m.mount_path == "/datasets/imagenet" and m.read_only
               for m in pod.spec.containers[0].volume_mounts)

    # the same export inline is what "restricted" refuses: hence the volume and its claim
    inline = make_job(dataclasses.replace(job, name="wl-900003-inline", workload_id=900003,
                                          mounts=()))
    inline["spec"]["template"]["spec"]["volumes"].append(
        {"name": "inline", "nfs": {"server": "nfs.example.org", "path": "/exports/imagenet"}})
    inline_pod = {"apiVersion": "v1", "kind": "Pod",
                  "metadata": {"name": "inline-nfs", "namespace": tenant.namespace},
                  "spec": inline["spec"]["template"]["spec"]}
    with pytest.raises(KubeRefused, match=r'restricted volume type.*"nfs"'):
        admin.create(inline_pod)

    admin.delete("Job", job.name, tenant.namespace)
    with TestCase.captureOnCommitCallbacks(execute=False):
        dataset_delete(dataset=dataset, user=owner)
    assert dataset_claims_delete(dataset_id=dataset.pk, namespaces=None) == 1
    eventually(lambda: admin.get("PersistentVolumeClaim", spec.claim_name,
                                 tenant.namespace) is None, timeout=90,
               message="the dataset's claim was not deleted")
    eventually(lambda: admin.get("PersistentVolume", spec.volume_name) is None, timeout=90,
               message="the dataset's volume was not deleted")


@pytest.mark.parametrize("change, refusal", [
    (lambda pv: pv["metadata"]["labels"].pop("gpu-portal.io/dataset-id"), "for datasets only"),
    (lambda pv: pv["spec"].update(nfs=None, hostPath={"path": "/"}), "never a node's own"),
    (lambda pv: pv["spec"]["nfs"].update(readOnly=False), "is read-only"),
    (lambda pv: pv["spec"].update(accessModes=["ReadWriteMany"]), "is read-only"),
])
def test_the_portal_makes_no_volume_but_a_read_only_datasets(cluster, tenant, change, refusal):
    """The admission policy behind the portal's right to make PersistentVolumes: whoever held
    its ServiceAccount could otherwise give a tenant's claim a node's root filesystem."""
    spec = DatasetClaimSpec(dataset_id=900010, namespace=tenant.namespace,
                            project_id=tenant.keystone_project_id, size_gib=1,
                            volume_source={"nfs": {"server": "nfs.example.org",
                                                   "path": "/exports/x", "readOnly": True}})
    volume = make_dataset_volume(spec)
    change(volume)
    volume["spec"] = {key: value for key, value in volume["spec"].items() if value is not None}
    with pytest.raises(KubeRefused, match=refusal):
        Kube().create(volume)  # as the portal's ServiceAccount
    assert Kube(cluster.api_client()).get("PersistentVolume", spec.volume_name) is None
