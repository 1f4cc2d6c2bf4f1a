"""A launch's volumes in its manifests, as dicts: every kind of workload mounts them in the
application's container of every pod it makes (a service's, a Job's, every JobSet rank's, an
MPIJob's launcher and workers), from the claims the launch resolved; valid against the
Kubernetes schema; the impossible refused before any manifest."""

from __future__ import annotations

import dataclasses

import kubernetes_validate
import pytest

from tests.support.manifests import CUSTOM_BATCH, DDP, JUPYTER, MPIJOB
from workloads.manifests import PodMount, WorkloadSpec, workload_objects

MOUNTS = (PodMount(claim="vol-7-datasets", path="/data"),
          PodMount(claim="vol-8-reference", path="/ref", read_only=True))
WANTED_MOUNTS = [{"name": "mount-0", "mountPath": "/data"},
                 {"name": "mount-1", "mountPath": "/ref", "readOnly": True}]
WANTED_VOLUMES = [{"name": "mount-0", "persistentVolumeClaim": {"claimName": "vol-7-datasets"}},
                  {"name": "mount-1", "persistentVolumeClaim": {"claimName": "vol-8-reference",
                                                                "readOnly": True}}]
SPECS = {"service": JUPYTER, "batch": CUSTOM_BATCH, "jobset": DDP, "mpijob": MPIJOB}


def pod_templates(spec: WorkloadSpec) -> dict[str, dict]:
    """Every pod template of the workload's objects, by where it is."""
    found = {}
    for obj in workload_objects(spec):
        body = obj.get("spec") or {}
        if obj["kind"] in ("Deployment", "Job"):
            found[obj["kind"]] = body["template"]
        elif obj["kind"] == "JobSet":
            found["JobSet"] = body["replicatedJobs"][0]["template"]["spec"]["template"]
        elif obj["kind"] == "MPIJob":
            for role, replica in body["mpiReplicaSpecs"].items():
                found[f"MPIJob {role}"] = replica["template"]
    return found


@pytest.mark.parametrize("name", SPECS)
def test_every_pod_of_every_kind_mounts_the_launchs_volumes(name):
    spec = dataclasses.replace(SPECS[name], mounts=MOUNTS)
    templates = pod_templates(spec)
    assert templates
    for where, pod in templates.items():
        app = pod["spec"]["containers"][0]
        got = [m for m in app["volumeMounts"] if m["name"].startswith("mount-")]
        assert got == WANTED_MOUNTS, where
        volumes = [v for v in pod["spec"]["volumes"] if v["name"].startswith("mount-")]
        assert volumes == WANTED_VOLUMES, where
        # the proxy beside a service reads none of the researcher's data
        for other in pod["spec"]["containers"][1:]:
            assert not any(m["name"].startswith("mount-") for m in other.get("volumeMounts", []))


def test_an_mpijob_mounts_them_on_the_launcher_and_every_worker():
    templates = pod_templates(dataclasses.replace(MPIJOB, mounts=MOUNTS))
    assert set(templates) == {"MPIJob Launcher", "MPIJob Worker"}


def test_without_mounts_nothing_changes():
    for spec in SPECS.values():
        for pod in pod_templates(spec).values():
            assert not any(v["name"].startswith("mount-") for v in pod["spec"]["volumes"])


def test_the_home_volume_and_mounts_together():
    spec = dataclasses.replace(JUPYTER, home_claim="gpu-portal-home", mounts=MOUNTS[:1])
    app = pod_templates(spec)["Deployment"]["spec"]["containers"][0]
    assert [m["mountPath"] for m in app["volumeMounts"]] == ["/dev/shm", "/home/portal", "/data"]


@pytest.mark.parametrize("mounts", [
    (PodMount(claim="a", path="/data"), PodMount(claim="b", path="/data")),
    (PodMount(claim="a", path="data"),),
    (PodMount(claim="a", path="/home/portal"),),
], ids=["twice", "relative", "over-home"])
def test_impossible_mounts_are_refused_before_any_manifest(mounts):
    with pytest.raises(ValueError, match="mount paths"):
        dataclasses.replace(JUPYTER, home_claim="gpu-portal-home", mounts=mounts)


@pytest.mark.parametrize("name", ["service", "batch"])
def test_valid_against_the_kubernetes_schema(name):
    version = kubernetes_validate.utils.latest_version()
    for obj in workload_objects(dataclasses.replace(SPECS[name], mounts=MOUNTS)):
        kubernetes_validate.validate(obj, version, strict=True)


CHECKPOINT = PodMount(claim="vol-9-runs", path="/portal/checkpoint",
                      sub_path="checkpoints/wl-12-train")


@pytest.mark.parametrize("name", ["batch", "jobset", "mpijob"])
def test_every_pod_of_a_batch_job_mounts_its_checkpoint_folder_and_names_it(name):
    """Read-write, the folder as the mount's subPath (the kubelet makes it when it is not
    there), PORTAL_CHECKPOINT_DIR in the program's environment; mpirun passes it on."""
    spec = dataclasses.replace(SPECS[name], checkpoint=CHECKPOINT)
    for where, pod in pod_templates(spec).items():
        app = pod["spec"]["containers"][0]
        assert {"name": "checkpoint", "mountPath": "/portal/checkpoint",
                "subPath": "checkpoints/wl-12-train"} in app["volumeMounts"], where
        assert {"name": "checkpoint", "persistentVolumeClaim": {"claimName": "vol-9-runs"}} \
            in pod["spec"]["volumes"], where
        assert {"name": "PORTAL_CHECKPOINT_DIR", "value": "/portal/checkpoint"} in app["env"], \
            where
        if where == "MPIJob Launcher":
            at = app["args"].index("PORTAL_CHECKPOINT_DIR")
            assert app["args"][at - 1] == "-x"
    if name == "batch":
        version = kubernetes_validate.utils.latest_version()
        for obj in workload_objects(spec):
            kubernetes_validate.validate(obj, version, strict=True)


@pytest.mark.parametrize("checkpoint", [
    dataclasses.replace(CHECKPOINT, read_only=True),
    dataclasses.replace(CHECKPOINT, path="/data"),
    dataclasses.replace(CHECKPOINT, sub_path=""),
    dataclasses.replace(CHECKPOINT, sub_path="a/../../b"),
], ids=["read-only", "elsewhere", "no-folder", "dotdot"])
def test_an_impossible_checkpoint_is_refused_before_any_manifest(checkpoint):
    with pytest.raises(ValueError, match="checkpoint"):
        dataclasses.replace(CUSTOM_BATCH, checkpoint=checkpoint)


def test_a_service_has_no_checkpoint():
    with pytest.raises(ValueError, match="only a batch workload"):
        dataclasses.replace(JUPYTER, checkpoint=CHECKPOINT)
