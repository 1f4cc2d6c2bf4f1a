"""A batch job's checkpoint directory on the real control plane with Kueue: a borrower with a
checkpoint folder is reclaimed by Kueue and runs again, and is then put back in line by the
portal (a maintenance drain's workload_requeue); the pods of every run mount the same folder of
the same claim, bound by the real PV controller to a PersistentVolume made beforehand, with
PORTAL_CHECKPOINT_DIR naming it. KWOK runs no container, so the first run's file is written
where its pod's mount lands on this machine (the PV's hostPath + the mount's subPath) and found
through the requeued copy's pod the same way.

The kubesim tests of the same (tests/workloads/test_checkpoints.py) run the launch through the
API and the requeue's Job; these add the real API server's admission of the pods, the real
scheduler's binding of pods with a claim, and Kueue's suspend and resume of the same Job."""

from __future__ import annotations

import contextlib
import shutil
import uuid
from pathlib import Path

import pytest
from django.test import TestCase

from kube.client import Kube, NotFound
from storage.models import StorageClass
from storage.services import volume_create
from tests.support.kueue import launch, make_tenant, queued_cluster  # noqa: F401
from tests.support.tracking import state_of, track_until
from tests.support.waiting import eventually
from workloads.models import Workload
from workloads.mounts import ResolvedCheckpoint
from workloads.services import workload_requeue
from workloads.tasks import workload_create_task, workload_stop_task
from workloads.tracking.tracker import Tracker

pytestmark = [pytest.mark.django_db, pytest.mark.realcluster,
              pytest.mark.timeout(600)]  # alone, its first test starts the Kueue control plane

S = Workload.State


@pytest.fixture
def owner(db):
    from identity.models import User

    return User.objects.create(username=f"researcher-{uuid.uuid4().hex[:8]}")


@pytest.fixture
def made_volume(queued_cluster, kueue_cluster, tmp_path):  # noqa: F811
    """A PersistentVolume of a class of its own on a folder of this machine, and the
    StorageClass row that offers the class: the PV controller binds the claim to it. Taken
    away after the test's namespaces (queued_cluster), whose claim holds it until then."""
    admin = Kube(kueue_cluster.api_client())
    class_name = f"manual-{uuid.uuid4().hex[:8]}"
    root = tmp_path / "volume"
    root.mkdir()
    admin.create({"apiVersion": "v1", "kind": "PersistentVolume",
                  "metadata": {"name": f"pv-{class_name}"},
                  "spec": {"capacity": {"storage": "10Gi"},
                           "accessModes": ["ReadWriteMany", "ReadWriteOnce"],
                           "persistentVolumeReclaimPolicy": "Retain",
                           "storageClassName": class_name,
                           "hostPath": {"path": str(root)}}})
    StorageClass.objects.create(name=class_name, description="made by hand")
    yield class_name, root
    admin.delete("PersistentVolume", f"pv-{class_name}")
    # its claim went with the test's namespace; the controller-manager's protection of a
    # volume once bound is not this test's to wait for (the volume is Retain, never reused)
    with contextlib.suppress(NotFound):
        admin.patch("PersistentVolume", f"pv-{class_name}", {"metadata": {"finalizers": None}})
    eventually(lambda: admin.get("PersistentVolume", f"pv-{class_name}") is None, timeout=60,
               message="the test's PersistentVolume is not gone")
    shutil.rmtree(root, ignore_errors=True)


def running_pod(kube: Kube, workload: Workload) -> dict:
    """The workload's pod, scheduled by the real scheduler (its claim bound)."""
    def scheduled() -> dict:
        listed = kube.list("Pod", workload.tenant.namespace,
                           label_selector=f"gpu-portal.io/workload-id={workload.pk}")
        pods = [pod for pod in listed["items"]
                if pod["spec"].get("nodeName") and not pod["metadata"].get("deletionTimestamp")]
        assert pods, workload.reason
        return pods[0]

    return eventually(scheduled, timeout=60, message=f"no pod of #{workload.pk} was scheduled")


def checkpoint_of(pod: dict) -> tuple:
    app = pod["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in app.get("env", [])}
    mount, = [m for m in app["volumeMounts"] if m["name"] == "checkpoint"]
    volume, = [v for v in pod["spec"]["volumes"] if v["name"] == "checkpoint"]
    return (env["PORTAL_CHECKPOINT_DIR"], mount["mountPath"], mount["subPath"],
            volume["persistentVolumeClaim"]["claimName"])


def folder_on_this_machine(kube: Kube, pod: dict) -> Path:
    """Where the pod's checkpoint mount lands: its claim's PersistentVolume's hostPath, then the
    mount's subPath (what the kubelet would mount)."""
    _, _, sub_path, claim_name = checkpoint_of(pod)
    claim = kube.get("PersistentVolumeClaim", claim_name, pod["metadata"]["namespace"])
    volume = kube.get("PersistentVolume", claim["spec"]["volumeName"])
    return Path(volume["spec"]["hostPath"]["path"]) / sub_path


def test_a_reclaimed_and_requeued_job_finds_its_checkpoint(queued_cluster, kueue_cluster,  # noqa: F811
                                                           owner, gpu_types, made_volume):
    class_name, root = made_volume
    lender = make_tenant(queued_cluster, a100=4)
    borrower = make_tenant(queued_cluster, a100=4)
    with TestCase.captureOnCommitCallbacks(execute=False):
        volume = volume_create(tenant=borrower, user=owner, name="runs", size_gib=10,
                               scope="user", storage_class=class_name)
    tracker = Tracker()
    big = launch(borrower, owner, gpu_types, name="big", gpus=8, run_seconds=900,
                 checkpoint=ResolvedCheckpoint(volume=volume))
    track_until(tracker, lambda: state_of(big).state == S.RUNNING, timeout=90,
                describe=lambda: f"{big.state}: {big.reason}")
    admin = Kube(kueue_cluster.api_client())
    first = running_pod(admin, big)
    folder = f"checkpoints/{big.object_name}"
    wanted = ("/portal/checkpoint", "/portal/checkpoint", folder, volume.claim_name)
    assert checkpoint_of(first) == wanted
    # the run saves a checkpoint where its mount lands
    saved = folder_on_this_machine(admin, first)
    assert saved == root / folder
    saved.mkdir(parents=True)
    (saved / "step-00000500.pt").write_bytes(b"weights")

    # the lender takes its GPUs back: Kueue suspends the Job, and resumes it later
    own = launch(lender, owner, gpu_types, name="own", gpus=4, run_seconds=3)
    track_until(tracker, lambda: state_of(big).state == S.QUEUED, timeout=90,
                describe=lambda: f"{big.state}: {big.reason}")
    track_until(tracker, lambda: state_of(own).state == S.SUCCEEDED, timeout=90,
                describe=lambda: f"{own.state}: {own.reason}")
    track_until(tracker, lambda: state_of(big).state == S.RUNNING, timeout=90,
                describe=lambda: f"{big.state}: {big.reason}")
    again = running_pod(admin, big)
    assert again["metadata"]["uid"] != first["metadata"]["uid"]
    assert checkpoint_of(again) == wanted

    # a maintenance drain puts it back in line: the copy runs from the same spec
    with TestCase.captureOnCommitCallbacks(execute=False):
        copy = workload_requeue(workload=big, reason="Maintenance on its nodes.")
    assert copy is not None
    workload_stop_task(big.pk)  # the stopped run's Job goes, its GPUs with it
    workload_create_task(copy.pk)
    track_until(tracker, lambda: state_of(copy).state == S.RUNNING, timeout=120,
                describe=lambda: f"copy {copy.state}: {copy.reason}")
    resumed = running_pod(admin, copy)
    assert checkpoint_of(resumed) == wanted
    assert (folder_on_this_machine(admin, resumed) / "step-00000500.pt").read_bytes() == \
        b"weights"
