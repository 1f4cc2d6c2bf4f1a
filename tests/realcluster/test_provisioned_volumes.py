"""Volumes bound by a real dynamic provisioner (stack/k8s/provisioner.py: gpu-portal-provisioner
on sig-storage-lib-external-provisioner, the default class `standard`) on the control plane with
Kueue, through the portal's API as a member: the claim its task makes is provisioned and bound
(a folder of its own under the provisioner's root, a hostPath PersistentVolume naming it), the
tracker brings `bound` to the volume, a notebook and a two-node group mount it (the real
scheduler places no pod whose claim is unbound), the storage quota refuses with 403, a mounted
volume is not deleted (409), another project sees 404, and deleting it takes its folder away."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.test import Client, TestCase

from kube.client import Kube
from kube.labels import LABEL_WORKLOAD_ID
from stack.k8s.addons import addon
from stack.k8s.provisioner import NAME, STORAGE_CLASS, SharedFolderProvisioner
from storage.models import Volume
from storage.services import storage_class_set
from storage.tasks import volume_claim_apply_task, volume_claim_delete_task
from tenants.models import Tenant
from tenants.provisioning import tenant_reconcile
from tenants.services import quota_update
from tests.support.kueue import queued_cluster  # noqa: F401 - a fixture
from tests.support.tracking import state_of, track_until
from tests.support.waiting import eventually
from workloads.models import Workload
from workloads.services import workload_stop
from workloads.tasks import workload_create_task, workload_stop_task
from workloads.tracking.tracker import Tracker

pytestmark = [pytest.mark.django_db, pytest.mark.realcluster, pytest.mark.timeout(300)]

S = Workload.State


def call(token: str, method: str, url: str, body=None):
    """The API as the caller, its on-commit tasks held (the test runs each itself)."""
    client = Client(HTTP_X_AUTH_TOKEN=token)
    with TestCase.captureOnCommitCallbacks(execute=False):
        if method in ("get", "delete"):
            return getattr(client, method)(url)
        return getattr(client, method)(url, body, content_type="application/json")


def answered(response, status: int, code: str | None = None) -> dict:
    assert response.status_code == status, (response.status_code, response.content[:500])
    body = response.json() if response.content else {}
    if code is not None:
        assert body["code"] == code, body
    return body


@pytest.fixture
def lab(queued_cluster, kueue_cluster, login, project_token) -> dict:  # noqa: F811
    """vision-lab on the Kueue cluster with room for a notebook and a group of two A100 nodes,
    20 GiB and 3 volumes of storage; the provisioner's class offered."""
    login("researcher")
    tenant = Tenant.objects.get(name="vision-lab")
    # vision-lab's namespace is shared with the other tests of this cluster (its Keystone
    # project is the researcher's token's): claims they left would count against the 20 GiB
    with kueue_cluster.api_client() as api:
        kube = Kube(api)
        left = [c["metadata"]["name"] for c in
                kube.list("PersistentVolumeClaim", tenant.namespace)["items"]]
        for name in left:
            kube.delete("PersistentVolumeClaim", name, tenant.namespace)
        eventually(lambda: not kube.list("PersistentVolumeClaim", tenant.namespace)["items"],
                   timeout=60, message=f"the claims other tests left: {left}")
    quota_update(tenant=tenant, acting_user=None, changes={
        "gpus_total": 12, "gpus_by_type": {"a100": 12, "v100": 0, "t4": 0}, "max_workloads": 10,
        "cpu": 64, "memory_gb": 256, "storage_gib": 20, "volumes": 3})
    tenant_reconcile(tenant_id=tenant.pk)
    tenant.refresh_from_db()
    queued_cluster.append(tenant)
    storage_class_set(user=None, name=STORAGE_CLASS, description="shared folders",
                      is_default=True)
    return {"tenant": tenant, "researcher": project_token("researcher", "vision-lab"),
            "student": project_token("student", "nlp-lab")}


def pods_of(kube: Kube, workload_id: int, namespace: str) -> list[dict]:
    return kube.list("Pod", namespace,
                     label_selector=f"{LABEL_WORKLOAD_ID}={workload_id}")["items"]


def claims_mounted(pod: dict) -> dict[str, str]:
    """claim name → the path the program's container mounts it at."""
    volumes = {v["name"]: v["persistentVolumeClaim"]["claimName"]
               for v in pod["spec"].get("volumes") or () if v.get("persistentVolumeClaim")}
    app = next(c for c in pod["spec"]["containers"] if c["name"] == "app")
    return {volumes[m["name"]]: m["mountPath"] for m in app.get("volumeMounts") or ()
            if m["name"] in volumes}


def test_a_members_volume_is_provisioned_bound_mounted_and_its_folder_deleted_with_it(
        lab, kueue_cluster):
    tenant, token = lab["tenant"], lab["researcher"]
    admin = Kube(kueue_cluster.api_client())
    provisioner = addon(kueue_cluster, "provisioner")
    assert isinstance(provisioner, SharedFolderProvisioner) and provisioner.root is not None

    made = answered(call(token, "post", "/api/v1/volumes/",
                         {"name": "data", "size_gib": 10, "scope": "user"}), 201)
    assert made["state"] == "pending" and made["storage_class"] == STORAGE_CLASS
    assert volume_claim_apply_task(made["id"]) == "created"  # its task, as the portal's account

    def bound() -> dict:
        claim = admin.get("PersistentVolumeClaim", made["claim_name"], tenant.namespace)
        assert claim and claim["status"].get("phase") == "Bound", claim and claim["status"]
        return claim

    claim = eventually(bound, timeout=60, message="the provisioner did not bind the claim")
    assert claim["metadata"]["annotations"]["volume.kubernetes.io/storage-provisioner"] == NAME
    volume = admin.get("PersistentVolume", claim["spec"]["volumeName"])
    assert volume is not None
    folder = Path(volume["spec"]["hostPath"]["path"])
    assert folder == provisioner.root / tenant.namespace / volume["metadata"]["name"]
    assert folder.is_dir()
    assert volume["spec"]["persistentVolumeReclaimPolicy"] == "Delete"
    assert volume["spec"]["capacity"]["storage"] == "10Gi"

    def tracked() -> Volume:
        Tracker().run_for(0.5)
        row = Volume.objects.get(pk=made["id"])
        assert row.state == Volume.State.BOUND, (row.state, row.reason)
        return row

    assert eventually(tracked, timeout=30).capacity_gib == 10
    url = f"/api/v1/volumes/{made['id']}/"
    assert answered(call(token, "get", url), 200)["state"] == "bound"

    # over the storage quota: 10 of 20 GiB held
    body = answered(call(token, "post", "/api/v1/volumes/",
                         {"name": "more", "size_gib": 11, "scope": "user"}), 403,
                    "quota_exceeded")
    assert "10 of 20 GiB" in body["detail"], body
    # another project does not see it
    answered(call(lab["student"], "get", url), 404, "not_found")
    answered(call(lab["student"], "delete", url), 404, "not_found")

    mounts = [{"volume": made["id"], "path": "/data"}]
    notebook = answered(call(token, "post", "/api/v1/workloads/", {
        "name": "with data", "template": "jupyter", "gpu_type": "a100", "gpu_count": 1,
        "mounts": mounts}), 201)
    group = answered(call(token, "post", "/api/v1/workloads/", {
        "name": "ddp with data", "template": "pytorch-ddp", "kind": "batch", "gpu_type": "a100",
        "gpu_count": 4, "nodes": 2, "command": ["python", "train.py"], "mounts": mounts,
        "env": {"KUBESIM_RUN_SECONDS": "600"}}), 201)
    for launched in (notebook, group):
        workload_create_task(launched["id"])
    tracker = Tracker()
    for launched in (notebook, group):
        workload = Workload.objects.get(pk=launched["id"])
        track_until(tracker, lambda w=workload: state_of(w).state == S.RUNNING, timeout=90,
                    describe=lambda w=workload: f"#{w.pk} {w.state}: {w.reason}")
    notebook_pods = pods_of(admin, notebook["id"], tenant.namespace)
    group_pods = pods_of(admin, group["id"], tenant.namespace)
    assert len(notebook_pods) == 1 and len(group_pods) == 2
    assert len({p["spec"]["nodeName"] for p in group_pods}) == 2  # one rank per node
    for pod in (*notebook_pods, *group_pods):
        assert claims_mounted(pod).get(made["claim_name"]) == "/data", pod["spec"]

    # mounted by live workloads: not deleted
    body = answered(call(token, "delete", url), 409, "volume_in_use")
    assert f"#{notebook['id']}" in body["detail"] or f"#{group['id']}" in body["detail"]

    researcher = Workload.objects.get(pk=notebook["id"]).owner
    for launched in (notebook, group):
        with TestCase.captureOnCommitCallbacks(execute=False):
            workload_stop(workload=Workload.objects.get(pk=launched["id"]), user=researcher)
        workload_stop_task(launched["id"])
    # the claim's protection keeps it while a pod that mounts it is there
    eventually(lambda: not pods_of(admin, notebook["id"], tenant.namespace)
               and not pods_of(admin, group["id"], tenant.namespace), timeout=90,
               message="the workloads' pods were not deleted")

    answered(call(token, "delete", url), 204)
    assert volume_claim_delete_task(made["id"]) is True
    eventually(lambda: admin.get("PersistentVolume", volume["metadata"]["name"]) is None,
               timeout=90, message="the provisioner did not delete the volume")
    assert not folder.exists()
