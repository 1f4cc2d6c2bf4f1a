"""An `s3` secret against a real S3 server (versitygw on loopback, tests/support/s3.py): what the
portal gives a launch's pod — the AWS variables by secretKeyRef and the rclone configuration in
the mounted Secret — reaches the bucket: boto3, configured only by those variables, lists and
reads its object, and so does a client built from the rclone remote. A wrong key is refused by
the server."""

from __future__ import annotations

import base64
import configparser
import os

import pytest
from botocore.exceptions import ClientError
from kubernetes import client as k8s

from tests.support.s3 import s3_client
from tests.support.secrets import secret_made
from tests.workloads.api_calls import launch
from workloads.models import Workload

pytestmark = pytest.mark.django_db

BATCH = {"name": "reader", "template": "custom", "kind": "batch", "gpu_type": "a100",
         "gpu_count": 1, "image": "docker.io/library/python:3.12",
         "command": ["python", "-c", "print('hello')"]}


def pod_environment(cluster, namespace: str, container) -> dict[str, str]:
    """The container's variables as the kubelet would set them: values, and each secretKeyRef
    read from its Secret."""
    core = k8s.CoreV1Api(cluster.api_client())
    env = {}
    for item in container.env or ():
        if item.value_from is None:
            env[item.name] = item.value or ""
            continue
        ref = item.value_from.secret_key_ref
        secret = core.read_namespaced_secret(ref.name, namespace)
        env[item.name] = base64.b64decode(secret.data[ref.key]).decode()
    return env


def mounted_file(cluster, namespace: str, pod, path: str) -> str:
    """The content of the file at `path` in the pod's container, from the Secret volume mounted
    at its folder."""
    folder, name = path.rsplit("/", 1)
    mount = next(m for m in pod.containers[0].volume_mounts if m.mount_path == folder)
    volume = next(v for v in pod.volumes if v.name == mount.name)
    secret = k8s.CoreV1Api(cluster.api_client()).read_namespaced_secret(
        volume.secret.secret_name, namespace)
    return base64.b64decode(secret.data[name]).decode()


def test_an_s3_secret_in_a_pod_reads_its_bucket_and_a_wrong_key_is_refused(
        vision, api_headers, eager_celery, cluster, s3_server, s3_bucket, monkeypatch):
    headers = api_headers("researcher")
    secret_id = secret_made(headers, "lake", kind="s3", data={
        "endpoint": s3_server.endpoint, "bucket": s3_bucket.name,
        "access_key": s3_server.access_key, "secret_key": s3_server.secret_key,
        "region": s3_server.region})
    response = launch(headers, {**BATCH, "secrets": [{"secret": secret_id}]})
    assert response.status_code == 201, response.json()
    workload = Workload.objects.get(pk=response.json()["id"])
    pod = k8s.BatchV1Api(cluster.api_client()).read_namespaced_job(
        workload.object_name, vision.namespace).spec.template.spec
    env = pod_environment(cluster, vision.namespace, pod.containers[0])

    # boto3 as a program in the pod runs it: nothing but the environment configures it
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL",
                 "AWS_DEFAULT_REGION"):
        monkeypatch.setenv(name, env[name])
    from_env = s3_client()
    listed = from_env.list_objects_v2(Bucket=s3_bucket.name)
    assert [o["Key"] for o in listed["Contents"]] == [s3_bucket.key]
    assert from_env.get_object(Bucket=s3_bucket.name, Key=s3_bucket.key)["Body"].read() == \
        s3_bucket.body

    # the rclone configuration RCLONE_CONFIG names: its S3 remote, and its alias of the bucket
    rclone = configparser.ConfigParser()
    rclone.read_string(mounted_file(cluster, vision.namespace, pod, env["RCLONE_CONFIG"]))
    remote = rclone["lake-s3"]
    assert (remote["type"], rclone["lake"]["remote"]) == ("s3", f"lake-s3:{s3_bucket.name}")
    from_rclone = s3_client(remote["endpoint"], remote["access_key_id"],
                            remote["secret_access_key"], remote["region"])
    assert from_rclone.get_object(Bucket=s3_bucket.name, Key=s3_bucket.key)["Body"].read() == \
        s3_bucket.body

    # a wrong secret key, and a key the server does not know: refused (for the unknown key AWS
    # answers 403 InvalidAccessKeyId, versitygw 404 XAdminUserNotFound)
    for access_key, secret_key, answers in (
            (s3_server.access_key, f"not-{s3_server.secret_key}",
             {("SignatureDoesNotMatch", 403)}),
            ("AKIAUNKNOWNUNKNOWN00", s3_server.secret_key,
             {("InvalidAccessKeyId", 403), ("XAdminUserNotFound", 404)})):
        wrong = s3_client(s3_server.endpoint, access_key, secret_key, s3_server.region)
        with pytest.raises(ClientError) as refused:
            wrong.list_objects_v2(Bucket=s3_bucket.name)
        answer = refused.value.response
        assert (answer["Error"]["Code"],
                answer["ResponseMetadata"]["HTTPStatusCode"]) in answers, answer
