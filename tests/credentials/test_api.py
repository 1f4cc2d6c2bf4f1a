"""`/api/v1/secrets/`: roles, another project's 404, write-only data, validation, the value
written to the cluster within the request (and nothing recorded when the cluster is away)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from django.test import Client

from audit.models import AuditRecord
from credentials.models import Secret
from kube.client import Kube

pytestmark = pytest.mark.django_db

VALUE = "hf_s3cr3t-value-that-must-stay-hidden"


def post(headers: dict, body: dict):
    return Client().post("/api/v1/secrets/", body, content_type="application/json", **headers)


def put(headers: dict, secret_id: int, body: dict):
    return Client().put(f"/api/v1/secrets/{secret_id}/", body, content_type="application/json",
                        **headers)


def get(headers: dict, path: str = ""):
    return Client().get(f"/api/v1/secrets/{path}", **headers)


def names(headers: dict) -> list[str]:
    return sorted(secret["name"] for secret in get(headers).json()["results"])


def stored(namespace: str, object_name: str) -> dict[str, str]:
    secret = Kube().get("Secret", object_name, namespace)
    assert secret is not None
    return {key: base64.b64decode(value).decode() for key, value in secret["data"].items()}


def env_secret(name: str = "hf", scope: str = "user") -> dict:
    return {"name": name, "kind": "env", "scope": scope, "data": {"HF_TOKEN": VALUE}}


def test_a_member_makes_a_secret_of_their_own_and_never_reads_its_value_back(vision, api_headers):
    headers = api_headers("researcher")
    response = post(headers, env_secret())
    assert response.status_code == 201, response.json()
    body = response.json()
    assert "data" not in body and VALUE not in response.content.decode()
    assert (body["name"], body["kind"], body["scope"], body["keys"]) == \
        ("hf", "env", "user", ["HF_TOKEN"])
    assert body["owner"] == "researcher" and body["may_change"] is True
    shown = get(headers, f"{body['id']}/")
    assert shown.status_code == 200 and shown.json()["keys"] == ["HF_TOKEN"]
    assert VALUE not in shown.content.decode() and VALUE not in get(headers).content.decode()
    secret = Secret.objects.get(pk=body["id"])
    assert secret.object_name == f"portal-secret-{secret.pk}"
    # the value is in the namespace's Secret, labelled as the portal's, and nowhere else
    assert stored(vision.namespace, secret.object_name) == {"HF_TOKEN": VALUE}
    labels = Kube().get("Secret", secret.object_name, vision.namespace)["metadata"]["labels"]
    assert labels["app.kubernetes.io/managed-by"] == "gpu-portal"
    assert labels["gpu-portal.io/secret-id"] == str(secret.pk)
    record = AuditRecord.objects.get(action="secret.create")
    assert record.after["keys"] == ["HF_TOKEN"] and VALUE not in json.dumps(record.after)


def test_replace_is_write_only_and_delete_takes_the_value_away(vision, api_headers):
    headers = api_headers("researcher")
    secret_id = post(headers, env_secret()).json()["id"]
    replaced = put(headers, secret_id, {"data": {"WANDB_API_KEY": "w" * 40, "HF_TOKEN": "x"}})
    assert replaced.status_code == 200, replaced.json()
    assert replaced.json()["keys"] == ["HF_TOKEN", "WANDB_API_KEY"]
    assert "w" * 40 not in replaced.content.decode()
    secret = Secret.objects.get(pk=secret_id)
    assert stored(vision.namespace, secret.object_name) == {"WANDB_API_KEY": "w" * 40,
                                                           "HF_TOKEN": "x"}
    assert Client().patch(f"/api/v1/secrets/{secret_id}/", {}, content_type="application/json",
                          **headers).status_code == 405
    assert Client().delete(f"/api/v1/secrets/{secret_id}/", **headers).status_code == 204
    assert Kube().get("Secret", secret.object_name, vision.namespace) is None
    assert not Secret.objects.filter(pk=secret_id).exists()
    assert [r.action for r in AuditRecord.objects.filter(action__startswith="secret.")
            .order_by("pk")] == ["secret.create", "secret.replace", "secret.delete"]


def test_roles_readers_see_names_members_use_managers_write(vision, api_headers):
    member, manager, reader = (api_headers("researcher"), api_headers("lead"),
                               api_headers("viewer"))
    assert post(member, env_secret("shared", scope="project")).status_code == 403
    assert post(reader, env_secret("mine")).status_code == 403
    project = post(manager, env_secret("shared", scope="project"))
    assert project.status_code == 201
    project_id = project.json()["id"]
    own = post(member, env_secret("mine")).json()["id"]
    # readers and members see the project's secret by name; nobody else sees a user's own
    assert names(reader) == ["shared"]
    assert names(member) == ["mine", "shared"]
    assert names(manager) == ["shared"]
    assert get(manager, f"{own}/").status_code == 404
    assert put(manager, own, {"data": {"A": "b"}}).status_code == 404
    # members use the project's, managers change it
    member_view = get(member, f"{project_id}/").json()
    assert member_view["may_change"] is False
    assert put(member, project_id, {"data": {"A": "b"}}).status_code == 403
    assert Client().delete(f"/api/v1/secrets/{project_id}/", **member).status_code == 403
    assert Client().delete(f"/api/v1/secrets/{project_id}/", **reader).status_code == 403
    assert put(manager, project_id, {"data": {"A": "b"}}).status_code == 200


def test_another_projects_secret_is_404(vision, api_headers):
    secret_id = post(api_headers("lead"), env_secret("shared", scope="project")).json()["id"]
    other = api_headers("student", "nlp-lab")
    assert get(other, f"{secret_id}/").status_code == 404
    assert put(other, secret_id, {"data": {"A": "b"}}).status_code == 404
    assert Client().delete(f"/api/v1/secrets/{secret_id}/", **other).status_code == 404
    assert names(other) == []
    # the same member in their other project does not see it either
    assert names(api_headers("researcher", "nlp-lab")) == []


def test_names_are_unique_per_owner_and_per_project(vision, api_headers):
    member = api_headers("researcher")
    assert post(member, env_secret()).status_code == 201
    taken = post(member, env_secret())
    assert taken.status_code == 409 and taken.json()["code"] == "secret_name_taken"
    # a project secret may have the name of a user's own
    assert post(api_headers("lead"), env_secret("hf", scope="project")).status_code == 201


@pytest.mark.parametrize(("body", "field", "message"), [
    ({"name": "Bad Name", "kind": "env", "data": {"A": "b"}}, "name", "lower-case letters"),
    ({"name": "x", "kind": "env", "data": {"1A": VALUE}}, "data", "is not a variable's name"),
    ({"name": "x", "kind": "env", "data": {"NVIDIA_VISIBLE_DEVICES": VALUE}}, "data",
     "NVIDIA_VISIBLE_DEVICES"),
    ({"name": "x", "kind": "env", "data": {}}, "data", "object of names"),
    ({"name": "x", "kind": "file", "data": {"../etc/passwd": VALUE}}, "data",
     "is not a file name"),
    ({"name": "x", "kind": "file", "data": {"a": "x" * (300 * 1024), "b": "y" * (300 * 1024)}}, "data", "at most"),
    ({"name": "x", "kind": "registry", "data": {"server": "registry.example.org",
                                               "username": "me"}}, "data",
     "password is required"),
    ({"name": "x", "kind": "registry", "data": {"server": "not a host", "username": "me",
                                               "password": VALUE}}, "data", "host name"),
    ({"name": "x", "kind": "s3", "data": {"endpoint": "ftp://x", "bucket": "b1b",
                                         "access_key": "a", "secret_key": VALUE}}, "data",
     "endpoint is the S3 server's URL"),
    ({"name": "x", "kind": "s3", "data": {"endpoint": "https://s3.example.org",
                                         "bucket": "data", "access_key": "a",
                                         "secret_key": f"{VALUE}\n[evil]"}}, "data",
     "line break"),
    ({"name": "x", "kind": "s3", "data": {"endpoint": "https://s3.example.org",
                                         "access_key": "a", "secret_key": VALUE}}, "data",
     "bucket is required"),
    ({"name": "x", "kind": "vault", "data": {"A": VALUE}}, "kind", ""),
])
def test_data_is_validated_per_kind_and_never_echoed(vision, api_headers, body, field, message):
    response = post(api_headers("researcher"), body)
    assert response.status_code == 400, response.json()
    assert message in " ".join(response.json()["fields"][field])
    assert VALUE not in response.content.decode()
    assert not Secret.objects.exists()


def test_a_registry_outside_the_sites_registries_is_refused(vision, api_headers, settings):
    settings.PORTAL_IMAGE_REGISTRIES = ["registry.example.org/team"]
    member = api_headers("researcher")
    login = {"username": "me", "password": VALUE}
    refused = post(member, {"name": "ghcr", "kind": "registry",
                            "data": {"server": "ghcr.io", **login}})
    assert refused.status_code == 400
    assert "site's registries" in refused.json()["fields"]["data"][0]
    allowed = post(member, {"name": "team", "kind": "registry",
                            "data": {"server": "registry.example.org", **login}})
    assert allowed.status_code == 201, allowed.json()
    secret = Secret.objects.get(pk=allowed.json()["id"])
    config = Kube().get("Secret", secret.object_name, vision.namespace)
    assert config["type"] == "kubernetes.io/dockerconfigjson"
    auths = json.loads(stored(vision.namespace, secret.object_name)[".dockerconfigjson"])
    assert auths["auths"]["registry.example.org"]["password"] == VALUE
    assert allowed.json()["keys"] == ["password", "server", "username"]


def test_an_s3_secret_holds_the_aws_variables_and_an_rclone_config(vision, api_headers):
    data = {"endpoint": "https://s3.example.org", "bucket": "datasets", "access_key": "AKIA1",
            "secret_key": VALUE, "region": "eu-west-1"}
    response = post(api_headers("researcher"), {"name": "lake", "kind": "s3", "data": data})
    assert response.status_code == 201, response.json()
    secret = Secret.objects.get(pk=response.json()["id"])
    values = stored(vision.namespace, secret.object_name)
    assert {key: values[key] for key in values if key.startswith("AWS_")} == {
        "AWS_ACCESS_KEY_ID": "AKIA1", "AWS_SECRET_ACCESS_KEY": VALUE,
        "AWS_ENDPOINT_URL": "https://s3.example.org", "AWS_DEFAULT_REGION": "eu-west-1"}
    assert "[lake]\ntype = alias\nremote = lake-s3:datasets" in values["rclone.conf"]
    assert f"secret_access_key = {VALUE}" in values["rclone.conf"]


def test_a_cluster_that_does_not_answer_is_503_and_nothing_is_recorded(vision, api_headers,
                                                                       cluster, settings,
                                                                       tmp_path):
    headers = api_headers("researcher")
    kept = post(headers, env_secret("kept")).json()["id"]
    dead = tmp_path / "dead-kubeconfig"
    dead.write_text(Path(cluster.kubeconfig).read_text().replace(cluster.url,
                                                                 "http://127.0.0.1:9"))
    settings.KUBECONFIG = str(dead)
    response = post(headers, env_secret())
    assert response.status_code == 503 and response.json()["code"] == "cluster_unavailable"
    assert VALUE not in response.content.decode()
    assert put(headers, kept, {"data": {"OTHER": "v"}}).status_code == 503
    assert Client().delete(f"/api/v1/secrets/{kept}/", **headers).status_code == 503
    assert list(Secret.objects.values_list("name", "keys")) == [("kept", ["HF_TOKEN"])]
    assert list(AuditRecord.objects.filter(action__startswith="secret.")
                .values_list("action", flat=True)) == ["secret.create"]
