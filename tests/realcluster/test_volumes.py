"""Volumes on the real control plane, as the portal's own ServiceAccount: a volume's claim,
made by its task, is bound by the real PV controller to a PersistentVolume made beforehand (a
dynamic provisioner is the site's, and not here); the tracker's list + watch of claims brings
that to the volume's state; a workload's pod mounting the claim is admitted (Pod Security
restricted, the project's fence) and scheduled by the real scheduler, which schedules no pod
whose claim is unbound; deleting the volume deletes its claim."""

from __future__ import annotations

import dataclasses
import uuid

import pytest
from django.contrib.auth import get_user_model
from django.test import TestCase
from kubernetes import client as k8s

from kube.client import Kube
from storage.models import StorageClass, Volume
from storage.services import volume_claim_apply, volume_claim_delete, volume_create, volume_delete
from tenants.provisioning import tenant_reconcile
from tests.support.manifests import CUSTOM_BATCH
from tests.support.provisioning import tenant  # noqa: F401 - a fixture
from tests.support.waiting import eventually
from workloads.manifests import PodMount, make_job
from workloads.tracking.tracker import Tracker

pytestmark = [pytest.mark.django_db, pytest.mark.realcluster, pytest.mark.timeout(240)]


def test_a_claim_binds_to_a_volume_made_beforehand_and_a_pod_mounts_it(cluster, tenant):
    admin = Kube(cluster.api_client())
    tenant_reconcile(tenant_id=tenant.pk)  # the namespace, its quota with requests.storage
    owner = get_user_model().objects.create(username="id-ann", keystone_user_id="id-ann",
                                            name="ann")
    class_name = f"manual-{uuid.uuid4().hex[:8]}"  # no StorageClass: static binding only
    admin.create({"apiVersion": "v1", "kind": "PersistentVolume",
                  "metadata": {"name": f"pv-{class_name}"},
                  "spec": {"capacity": {"storage": "10Gi"},
                           "accessModes": ["ReadWriteMany", "ReadWriteOnce"],
                           "persistentVolumeReclaimPolicy": "Retain",
                           "storageClassName": class_name,
                           "hostPath": {"path": f"/tmp/{class_name}"}}})
    StorageClass.objects.create(name=class_name, description="made by hand")
    with TestCase.captureOnCommitCallbacks(execute=False):
        volume = volume_create(tenant=tenant, user=owner, name="datasets", size_gib=10,
                               scope="user", storage_class=class_name)
    assert volume_claim_apply(volume_id=volume.pk) == "created"  # as the portal's account

    def bound() -> dict:
        claim = admin.get("PersistentVolumeClaim", volume.claim_name, tenant.namespace)
        assert claim and claim["status"].get("phase") == "Bound", claim and claim["status"]
        return claim

    claim = eventually(bound, timeout=60, message="the PV controller did not bind the claim")
    assert claim["spec"]["volumeName"] == f"pv-{class_name}"

    def tracked() -> Volume:
        Tracker().run_for(0.5)
        volume.refresh_from_db()
        assert volume.state == Volume.State.BOUND, (volume.state, volume.reason)
        return volume

    assert eventually(tracked, timeout=30).capacity_gib == 10

    spec = dataclasses.replace(
        CUSTOM_BATCH, workload_id=900001, name="wl-900001-mounts", namespace=tenant.namespace,
        project_id=tenant.keystone_project_id, gpu_count=0, node_selector=(), cpu="1",
        memory="1Gi", run_as_non_root=True, run_as_user=1000, image="busybox:1.36",
        command=("sh", "-c", "ls /data"), args=(), gpu_resource="nvidia.com/gpu",
        mounts=(PodMount(claim=volume.claim_name, path="/data", read_only=True),))
    Kube().create(make_job(spec))  # as the portal's account, admitted by the real server
    core = k8s.CoreV1Api(cluster.api_client())

    def scheduled():
        pods = core.list_namespaced_pod(tenant.namespace,
                                        label_selector="gpu-portal.io/workload-id=900001").items
        assert pods and pods[0].spec.node_name, [p.status for p in pods]
        return pods[0]

    pod = eventually(scheduled, timeout=60, message="the pod mounting the claim was not scheduled")
    claims = {v.persistent_volume_claim.claim_name for v in pod.spec.volumes
              if v.persistent_volume_claim}
    assert claims == {volume.claim_name}
    assert any(m.mount_path == "/data" and m.read_only
               for m in pod.spec.containers[0].volume_mounts)

    admin.delete("Job", spec.name, tenant.namespace)
    with TestCase.captureOnCommitCallbacks(execute=False):
        volume_delete(volume=volume, user=owner)
    assert volume_claim_delete(volume_id=volume.pk) is True
    eventually(lambda: admin.get("PersistentVolumeClaim", volume.claim_name,
                                 tenant.namespace) is None, timeout=60,
               message="the claim was not deleted")
