"""A secret as Kubernetes objects and in every kind of workload's pods, as dicts: variables by
secretKeyRef (never a literal value), files in read-only secret volumes, a registry login as
imagePullSecrets, an s3 secret's AWS variables and rclone config; checked against the schema."""

from __future__ import annotations

import base64
import dataclasses
import json

import kubernetes_validate
import pytest

from credentials.manifests import SecretUse, make_secret, rclone_config, stored_data
from tests.support.manifests import CUSTOM_BATCH, DDP, JUPYTER, MPIJOB
from workloads.manifests import make_mpijob, mpirun_argv, workload_objects

ENV = SecretUse(name="hf", kind="env", object_name="portal-secret-1",
                keys=("HF_TOKEN", "WANDB_API_KEY"))
FILE = SecretUse(name="certs", kind="file", object_name="portal-secret-2",
                 keys=("ca.pem",), path="/run/secrets/certs")
REGISTRY = SecretUse(name="team", kind="registry", object_name="portal-secret-3",
                     keys=("password", "server", "username"))
S3 = SecretUse(name="lake", kind="s3", object_name="portal-secret-4",
               keys=("access_key", "bucket", "endpoint", "region", "secret_key"),
               path="/run/secrets/lake")
ALL = (ENV, FILE, REGISTRY, S3)

SECRET_ENV = [
    {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "portal-secret-1",
                                                        "key": "HF_TOKEN"}}},
    {"name": "WANDB_API_KEY", "valueFrom": {"secretKeyRef": {"name": "portal-secret-1",
                                                             "key": "WANDB_API_KEY"}}},
    *({"name": variable, "valueFrom": {"secretKeyRef": {"name": "portal-secret-4",
                                                        "key": variable}}}
      for variable in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL",
                       "AWS_DEFAULT_REGION")),
    {"name": "RCLONE_CONFIG", "value": "/run/secrets/lake/rclone.conf"},
]
SECRET_VOLUMES = [
    {"name": "portal-secret-1", "secret": {"secretName": "portal-secret-2", "defaultMode": 0o444}},
    {"name": "portal-secret-3", "secret": {"secretName": "portal-secret-4", "defaultMode": 0o444,
                                           "items": [{"key": "rclone.conf",
                                                      "path": "rclone.conf"}]}},
]
SECRET_MOUNTS = [
    {"name": "portal-secret-1", "mountPath": "/run/secrets/certs", "readOnly": True},
    {"name": "portal-secret-3", "mountPath": "/run/secrets/lake", "readOnly": True},
]


def pods(objects: list[dict]) -> list[dict]:
    """Every pod template among a workload's objects (an MPIJob's launcher and workers)."""
    found = []
    for obj in objects:
        spec = obj.get("spec") or {}
        if obj["kind"] in ("Deployment", "Job"):
            found.append(spec["template"]["spec"])
        elif obj["kind"] == "JobSet":
            found += [job["template"]["spec"]["template"]["spec"]
                      for job in spec["replicatedJobs"]]
        elif obj["kind"] == "MPIJob":
            found += [replica["template"]["spec"]
                      for replica in spec["mpiReplicaSpecs"].values()]
    return found


@pytest.mark.parametrize("spec", [JUPYTER, CUSTOM_BATCH, DDP, MPIJOB],
                         ids=["deployment", "job", "jobset", "mpijob"])
def test_every_pod_of_every_kind_of_workload_reads_its_secrets_by_reference(spec):
    objects = workload_objects(dataclasses.replace(spec, secrets=ALL))
    found = pods(objects)
    assert len(found) == (2 if spec is MPIJOB else 1)
    for pod in found:
        app = pod["containers"][0]
        names = [entry["name"] for entry in app["env"]]
        secret_env = [entry for entry in app["env"] if entry["name"] in
                      {item["name"] for item in SECRET_ENV}]
        assert secret_env == SECRET_ENV, names
        assert [v for v in pod["volumes"] if v["name"].startswith("portal-secret-")] == \
            SECRET_VOLUMES
        assert [m for m in app["volumeMounts"] if m["name"].startswith("portal-secret-")] == \
            SECRET_MOUNTS
        assert pod["imagePullSecrets"] == [{"name": "portal-secret-3"}]
    # no object of the workload holds one of the secrets' values: only the names above
    version = kubernetes_validate.utils.latest_version()
    for obj in objects:
        if obj["kind"] in ("Deployment", "Job", "Secret"):
            kubernetes_validate.validate(obj, version, strict=True)


def test_without_secrets_nothing_changes():
    for spec in (JUPYTER, CUSTOM_BATCH, DDP, MPIJOB):
        for pod in pods(workload_objects(spec)):
            assert "imagePullSecrets" not in pod
            assert not any(v["name"].startswith("portal-secret-") for v in pod["volumes"])


def test_mpirun_passes_the_secrets_variables_to_every_rank():
    spec = dataclasses.replace(MPIJOB, secrets=(ENV, S3))
    argv = mpirun_argv(spec)
    for variable in ("HF_TOKEN", "WANDB_API_KEY", "AWS_ACCESS_KEY_ID", "RCLONE_CONFIG"):
        assert ["-x", variable] == argv[argv.index(variable) - 1:argv.index(variable) + 1]
    launcher = make_mpijob(spec)["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]
    assert launcher["containers"][0]["args"] == argv[1:]


@pytest.mark.parametrize("secrets", [
    (ENV, dataclasses.replace(ENV, object_name="portal-secret-9")),  # HF_TOKEN twice
    (SecretUse(name="x", kind="env", object_name="portal-secret-9", keys=("OMP_NUM_THREADS",)),),
])
def test_a_variable_set_twice_is_refused_before_anything_is_sent(secrets):
    with pytest.raises(ValueError, match="set twice"):
        dataclasses.replace(MPIJOB, secrets=secrets)


def test_a_jobsets_own_variables_cannot_come_from_a_secret():
    with pytest.raises(ValueError, match="MASTER_ADDR"):
        dataclasses.replace(DDP, secrets=(SecretUse(
            name="x", kind="env", object_name="portal-secret-9", keys=("MASTER_ADDR",)),))


def test_a_use_is_frozen_as_names_and_thawed_the_same():
    for use in ALL:
        frozen = use.frozen()
        assert SecretUse.thawed(json.loads(json.dumps(frozen))) == use
    with pytest.raises(ValueError, match="absolute path"):
        SecretUse(name="certs", kind="file", object_name="portal-secret-2")
    with pytest.raises(ValueError, match="no files"):
        SecretUse(name="hf", kind="env", object_name="portal-secret-1", path="/x")


LABELS = {"app.kubernetes.io/managed-by": "gpu-portal", "gpu-portal.io/secret-id": "3"}


def decoded(secret: dict) -> dict[str, str]:
    return {key: base64.b64decode(value).decode() for key, value in secret["data"].items()}


def test_the_kubernetes_secret_of_each_kind():
    env = make_secret(namespace="ns", object_name="portal-secret-3", kind="env", name="hf",
                      data={"HF_TOKEN": "v"}, labels=LABELS)
    assert env == {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                   "metadata": {"name": "portal-secret-3", "namespace": "ns", "labels": LABELS},
                   "data": {"HF_TOKEN": base64.b64encode(b"v").decode()}}
    registry = make_secret(namespace="ns", object_name="portal-secret-3", kind="registry",
                           name="team", labels=LABELS,
                           data={"server": "registry.example.org", "username": "me",
                                 "password": "pw"})
    assert registry["type"] == "kubernetes.io/dockerconfigjson"
    assert json.loads(decoded(registry)[".dockerconfigjson"]) == {"auths": {
        "registry.example.org": {"username": "me", "password": "pw",
                                 "auth": base64.b64encode(b"me:pw").decode()}}}
    files = stored_data("file", "certs", {"ca.pem": "-----BEGIN-----\n"})
    assert files == {"ca.pem": "-----BEGIN-----\n"}
    s3 = {"endpoint": "https://s3.example.org", "bucket": "data", "access_key": "a",
          "secret_key": "s"}
    assert stored_data("s3", "lake", s3) == {
        "AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "s",
        "AWS_ENDPOINT_URL": "https://s3.example.org", "rclone.conf": rclone_config("lake", s3)}
    assert rclone_config("lake", s3) == (
        "[lake-s3]\ntype = s3\nprovider = Other\nenv_auth = false\naccess_key_id = a\n"
        "secret_access_key = s\nendpoint = https://s3.example.org\n\n"
        "[lake]\ntype = alias\nremote = lake-s3:data\n")
    version = kubernetes_validate.utils.latest_version()
    for secret in (env, registry):
        kubernetes_validate.validate(secret, version, strict=True)
