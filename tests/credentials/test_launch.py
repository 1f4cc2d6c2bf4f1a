"""Launching with secrets through the API: each kind reaches the pod by reference, the caller
may use only their own and their project's, and the rules of paths and variables; after a
launch with an env secret its value is in no object of the namespace but its Secret, in no API
answer, no row of the database, no audit record and no log line."""

from __future__ import annotations

import base64
import io
import json
import logging
import uuid

import pytest
from django.core.management import call_command
from django.test import Client
from kubernetes import client as k8s

from kube.client import KINDS, Kube, KubeError
from tests.support.journeys import JUPYTER, track_until
from tests.support.secrets import VALUE, secret_made
from tests.workloads.api_calls import launch
from workloads.models import Workload

pytestmark = pytest.mark.django_db

ENCODED = base64.b64encode(VALUE.encode()).decode()

BATCH = {"name": "train", "template": "custom", "kind": "batch", "gpu_type": "a100",
         "gpu_count": 1, "image": "docker.io/library/python:3.12",
         "command": ["python", "-c", "print('hello')"]}


def refused(response) -> list[str]:
    assert response.status_code == 400, response.json()
    assert set(response.json()["fields"]) == {"secrets"}, response.json()
    assert not Workload.objects.exists()
    return response.json()["fields"]["secrets"]


def namespace_objects(cluster, namespace: str) -> list[dict]:
    """Every object of the namespace, of every namespaced kind the portal knows the cluster
    serves, as the cluster's admin reads them."""
    kube, found = Kube(cluster.api_client()), []
    for kind, spec in KINDS.items():
        if not getattr(spec, "namespaced", True) or kind in ("Namespace", "Node",
                                                              "IPAddressPool"):
            continue
        try:
            found += [{**item, "kind": kind}
                      for item in kube.list(kind, namespace).get("items", [])]
        except KubeError:
            continue  # a kind this cluster does not serve
    return found


def readable(obj: dict) -> str:
    """An object as text, a Secret's values decoded (the API server stores them base64)."""
    text = json.dumps(obj)
    if obj["kind"] == "Secret":
        text += "".join(base64.b64decode(value).decode("utf-8", "replace")
                        for value in (obj.get("data") or {}).values())
    return text


def test_an_env_secret_reaches_the_pod_by_reference_and_its_value_nowhere_else(
        vision, api_headers, eager_celery, cluster, caplog):
    caplog.set_level(logging.DEBUG)
    headers = api_headers("researcher")
    # a value of its own for the look through the namespace, where the secrets earlier tests
    # made hold VALUE too (the answers, the database and the logs must hold no value at all)
    value = f"{VALUE}-{uuid.uuid4().hex}"
    encoded = base64.b64encode(value.encode()).decode()
    secret_id = secret_made(headers, data={"HF_TOKEN": value})
    response = launch(headers, {**JUPYTER, "secrets": [{"secret": secret_id}]})
    assert response.status_code == 201, response.json()
    assert response.json()["secrets"] == [{"name": "hf", "kind": "env", "path": ""}]
    workload = track_until(response.json()["id"], lambda w: w.state == "running")
    deployment = k8s.AppsV1Api(cluster.api_client()).read_namespaced_deployment(
        workload.object_name, vision.namespace)
    env = {item.name: item for item in deployment.spec.template.spec.containers[0].env}
    assert env["HF_TOKEN"].value is None
    ref = env["HF_TOKEN"].value_from.secret_key_ref
    assert (ref.name, ref.key) == (f"portal-secret-{secret_id}", "HF_TOKEN")
    # the cluster: only the secret's own Secret holds the value
    holders = [f"{obj['kind']} {obj['metadata']['name']}"
               for obj in namespace_objects(cluster, vision.namespace)
               if value in readable(obj) or encoded in json.dumps(obj)]
    assert holders == [f"Secret portal-secret-{secret_id}"]
    # the API's answers about it
    client = Client()
    for path in (f"/api/v1/workloads/{workload.pk}/", "/api/v1/workloads/",
                 f"/api/v1/workloads/{workload.pk}/events/", f"/api/v1/workloads/{workload.pk}/logs/",
                 "/api/v1/secrets/", f"/api/v1/secrets/{secret_id}/", "/api/v1/audit/"):
        answer = client.get(path, **headers)
        assert answer.status_code in (200, 403), (path, answer.status_code)
        assert VALUE not in answer.content.decode(), path
    admin_audit = client.get("/api/v1/audit/", **api_headers("admin", "admin"))
    assert admin_audit.status_code == 200 and "secret.create" in admin_audit.content.decode()
    assert VALUE not in admin_audit.content.decode()
    # the database, every table of it (the audit trail, the launch spec, the events)
    dump = io.StringIO()
    call_command("dumpdata", stdout=dump)
    assert "portal-secret-" in dump.getvalue() and VALUE not in dump.getvalue()
    # and every log line of the whole journey
    assert caplog.records and VALUE not in caplog.text


def test_each_kind_of_secret_in_a_batch_job(vision, api_headers, eager_celery, cluster,
                                            settings):
    settings.PORTAL_IMAGE_REGISTRIES = ["docker.io", "registry.example.org"]
    headers = api_headers("researcher")
    env = secret_made(headers)
    files = secret_made(headers, "certs", kind="file", data={"ca.pem": "pem"})
    registry = secret_made(headers, "team", kind="registry",
                           data={"server": "registry.example.org", "username": "me",
                                 "password": VALUE})
    s3 = secret_made(headers, "lake", kind="s3",
                     data={"endpoint": "https://s3.example.org", "bucket": "data",
                           "access_key": "a", "secret_key": VALUE})
    response = launch(headers, {**BATCH, "secrets": [
        {"secret": env}, {"secret": files, "path": "/data/certs"}, {"secret": registry},
        {"secret": s3}]})
    assert response.status_code == 201, response.json()
    assert [(s["name"], s["path"]) for s in response.json()["secrets"]] == [
        ("hf", ""), ("certs", "/data/certs"), ("team", ""), ("lake", "/run/secrets/lake")]
    workload = Workload.objects.get(pk=response.json()["id"])
    pod = k8s.BatchV1Api(cluster.api_client()).read_namespaced_job(
        workload.object_name, vision.namespace).spec.template.spec
    assert [s.name for s in pod.image_pull_secrets] == [f"portal-secret-{registry}"]
    mounts = {m.mount_path: m for m in pod.containers[0].volume_mounts}
    assert mounts["/data/certs"].read_only and mounts["/run/secrets/lake"].read_only
    volumes = {v.name: v.secret for v in pod.volumes if v.secret is not None}
    assert {v.secret_name for v in volumes.values()} == {f"portal-secret-{files}",
                                                        f"portal-secret-{s3}"}
    env_vars = {item.name: item for item in pod.containers[0].env}
    assert env_vars["AWS_SECRET_ACCESS_KEY"].value_from.secret_key_ref.name == \
        f"portal-secret-{s3}"
    assert env_vars["RCLONE_CONFIG"].value == "/run/secrets/lake/rclone.conf"
    assert all(item.value != VALUE for item in env_vars.values())
    # the pod is admitted and runs (Pod Security, the namespace's guard) with its secret volumes
    track_until(workload.pk, lambda w: w.state in ("running", "succeeded"))


def test_a_member_uses_the_projects_secret_but_nobody_another_ones_own(vision, api_headers,
                                                                     eager_celery):
    member, manager = api_headers("researcher"), api_headers("lead")
    project = secret_made(manager, "shared", scope="project")
    own = secret_made(member)
    assert "no secret" in refused(launch(manager, {**JUPYTER, "secrets": [{"secret": own}]}))[0]
    accepted = launch(member, {**JUPYTER, "secrets": [{"secret": project}]})
    assert accepted.status_code == 201, accepted.json()
    assert accepted.json()["secrets"][0]["name"] == "shared"


def test_another_projects_secret_is_not_found(vision, api_headers, eager_celery):
    member = api_headers("researcher")
    own = secret_made(member)
    # the same user, in their other project: the secret is vision-lab's
    other = launch(api_headers("researcher", "nlp-lab"), {**JUPYTER, "secrets": [{"secret": own}]})
    assert other.status_code in (400, 403), other.json()
    if other.status_code == 400:
        assert "secrets" in other.json()["fields"]


@pytest.mark.parametrize(("refs", "message"), [
    (lambda ids: [{"secret": ids["env"]}, {"secret": ids["env"]}], "named twice"),
    (lambda ids: [{"secret": ids["env"], "path": "/x"}], "no files to mount"),
    (lambda ids: [{"secret": ids["file"], "path": "relative"}], "absolute directory"),
    (lambda ids: [{"secret": ids["file"], "path": "/home/portal/x"}], "would cover"),
    (lambda ids: [{"secret": ids["file"], "path": "/etc"}], "would cover"),
    (lambda ids: [{"secret": ids["file"], "path": "/a/../b"}], "absolute directory"),
    (lambda ids: [{"secret": ids["file"], "path": "/data"},
                  {"secret": ids["other_file"], "path": "/data/x"}], "overlapping"),
    (lambda ids: [{"secret": ids["env"]}, {"secret": ids["env_again"]}], "sets HF_TOKEN"),
    (lambda ids: [{"secret": 10**9}], "no secret"),
])
def test_launch_rules_for_secrets(vision, api_headers, refs, message):
    member = api_headers("researcher")
    ids = {"env": secret_made(member),
           "env_again": secret_made(member, "hf2"),
           "file": secret_made(member, "certs", kind="file", data={"a": "b"}),
           "other_file": secret_made(member, "keys", kind="file", data={"c": "d"})}
    assert any(message in line for line in refused(launch(member, {
        **BATCH, "secrets": refs(ids)})))


def test_a_secrets_variable_may_not_shadow_the_launchs(vision, api_headers):
    member = api_headers("researcher")
    env = secret_made(member)
    problems = refused(launch(member, {**BATCH, "env": {"HF_TOKEN": "plain"},
                                       "secrets": [{"secret": env}]}))
    assert "HF_TOKEN, which the launch's env sets too" in problems[0]
    hook = secret_made(member, "hook", data={"LD_PRELOAD": "/x.so"})
    assert refused(launch(member, {**JUPYTER, "secrets": [{"secret": hook}]}))
