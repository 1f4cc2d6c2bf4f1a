"""A `registry` secret against a real private registry (CNCF Distribution on loopback,
tests/support/registry.py), with an image pushed into it: the launch check and the launch
resolve the image's manifest with the login the pod's imagePullSecrets Secret holds, through
the registry's own handshake (a Basic challenge, or a Bearer one and its token service), so
that a wrong password, an image the account may not read and a missing tag are refused before
any pod waits in ImagePullBackOff; the Secret the pod names is a kubernetes.io/dockerconfigjson
whose login for the registry is exactly one that pulls the image; a registry outside the site's
registries is refused whatever the secret, without being asked; a registry that does not answer
is a warning and the launch goes ahead. A secret is tried when it is made or replaced too: a
login its registry refuses is not kept. No answer carries the password."""

from __future__ import annotations

import base64
import contextlib
import json
import socket
import time
import uuid

import httpx
import pytest
from django.test import Client
from kubernetes import client as k8s

from catalogue.models import Template
from credentials.models import Secret
from tests.support.journeys import track_until
from tests.support.pages import field_error, launch_form
from tests.support.registry import (
    OTHER_USER,
    TEAM_USER,
    Registry,
    new_account,
    push_image,
    rotate_password,
)
from tests.support.secrets import secret_made
from tests.workloads.api_calls import launch
from workloads.models import Workload

pytestmark = pytest.mark.django_db

ACCEPT = "application/vnd.oci.image.manifest.v1+json"


def job(image: str, secret: int) -> dict:
    return {"name": "train", "template": "custom", "kind": "batch", "gpu_type": "a100",
            "gpu_count": 1, "image": image, "command": ["cat", "/hello.txt"],
            "secrets": [{"secret": secret}]}


def login_secret(headers: dict, registry: Registry, user: str = TEAM_USER, *,
                 password: str | None = None, name: str = "team") -> int:
    return secret_made(headers, name, kind="registry", data={
        "server": registry.host, "username": user,
        "password": registry.passwords[user] if password is None else password})


def check(headers: dict, body: dict) -> list[dict]:
    answer = Client().post("/api/v1/workloads/check/", body, content_type="application/json",
                           **headers)
    assert answer.status_code == 200, answer.json()
    return answer.json()["notes"]


def refused(answer, code: str, password: str) -> str:
    assert answer.status_code == 400, answer.json()
    body = answer.json()
    assert body["code"] == code, body
    assert password not in answer.content.decode()
    assert not Workload.objects.exists()
    return body["detail"]


@pytest.mark.parametrize("auth", ["htpasswd", "token"])
def test_the_secrets_login_resolves_the_image_and_the_pod_pulls_with_exactly_it(
        auth, request, vision, api_headers, eager_celery, cluster, registries_allowed):
    registry: Registry = request.getfixturevalue(f"{auth}_registry")
    repository = f"team/app-{uuid.uuid4().hex[:8]}"
    digest = push_image(registry, repository)
    image = f"{registry.host}/{repository}:v1"
    headers = api_headers("researcher")
    secret = login_secret(headers, registry)
    notes = check(headers, job(image, secret))
    assert ("info", f"{image} resolves to {digest[:19]}… with the login of the secret team.") \
        in [(n["level"], n["message"]) for n in notes]
    answer = launch(headers, job(image, secret))
    assert answer.status_code == 201, answer.json()
    assert registry.passwords[TEAM_USER] not in answer.content.decode()
    workload = Workload.objects.get(pk=answer.json()["id"])
    pod = k8s.BatchV1Api(cluster.api_client()).read_namespaced_job(
        workload.object_name, vision.namespace).spec.template.spec
    assert pod.containers[0].image == image
    assert [s.name for s in pod.image_pull_secrets] == [f"portal-secret-{secret}"]
    # the Secret the pod names, as the cluster keeps it: the kubelet's docker config, whose
    # entry for this registry is a login that pulls the image from the real registry
    stored = k8s.CoreV1Api(cluster.api_client()).read_namespaced_secret(
        f"portal-secret-{secret}", vision.namespace)
    assert stored.type == "kubernetes.io/dockerconfigjson"
    config = json.loads(base64.b64decode(stored.data[".dockerconfigjson"]))
    entry = config["auths"][registry.host]
    user, _, password = base64.b64decode(entry["auth"]).decode().partition(":")
    assert (user, password) == (TEAM_USER, registry.passwords[TEAM_USER])
    assert pulled_digest(registry, repository, user, password) == digest
    track_until(workload.pk, lambda w: w.state in ("running", "succeeded"))


def pulled_digest(registry: Registry, repository: str, user: str, password: str) -> str:
    """The manifest's digest as a client with only this login gets it (a Basic login, or a
    token bought with it from the registry's own token service)."""
    url = f"{registry.server.url}/v2/{repository}/manifests/v1"
    headers = {"Accept": ACCEPT}
    if registry.server.auth == "token":
        assert registry.server.tokens is not None
        token = httpx.get(registry.server.tokens.realm, auth=(user, password), timeout=10,
                          params={"service": "portal-registry",
                                  "scope": f"repository:{repository}:pull"}).json()["token"]
        answer = httpx.get(url, headers={**headers, "Authorization": f"Bearer {token}"},
                           timeout=10)
    else:
        answer = httpx.get(url, headers=headers, auth=(user, password), timeout=10)
    assert answer.status_code == 200, answer.text
    return answer.headers["Docker-Content-Digest"]


@pytest.mark.parametrize("auth", ["htpasswd", "token"])
def test_a_wrong_password_is_refused_when_the_secret_is_made_or_replaced(
        auth, request, vision, api_headers, registries_allowed):
    registry: Registry = request.getfixturevalue(f"{auth}_registry")
    headers = api_headers("researcher")
    wrong = f"not-{registry.passwords[TEAM_USER]}"
    data = {"server": registry.host, "username": TEAM_USER, "password": wrong}
    made = Client().post("/api/v1/secrets/", {"name": "team", "kind": "registry",
                                              "scope": "user", "data": data},
                         content_type="application/json", **headers)
    message = f"{registry.host} refused this user and password: check them and give them again."
    assert (made.status_code, made.json()["code"], made.json()["detail"]) == (
        400, "registry_login_failed", message)
    assert wrong not in made.content.decode()
    assert not Secret.objects.exists()
    secret = login_secret(headers, registry)
    replaced = Client().put(f"/api/v1/secrets/{secret}/", {"data": data},
                            content_type="application/json", **headers)
    assert (replaced.status_code, replaced.json()["code"]) == (400, "registry_login_failed")
    assert wrong not in replaced.content.decode()


@pytest.mark.parametrize("auth", ["htpasswd", "token"])
def test_a_password_changed_at_the_registry_is_refused_before_any_pod(
        auth, request, vision, api_headers, eager_celery, registries_allowed):
    registry: Registry = request.getfixturevalue(f"{auth}_registry")
    push_image(registry, "team/app")
    image = f"{registry.host}/team/app:v1"
    headers = api_headers("researcher")
    user = new_account(registry)
    secret = login_secret(headers, registry, user)
    old = rotate_password(registry, user)  # the site rotated it since
    detail = refused(launch(headers, job(image, secret)), "registry_login_failed", old)
    assert detail == (f"{registry.host} refused the login of the secret team: check its user "
                      "and password (replace the secret's value).")
    assert ("error", detail) in [(n["level"], n["message"])
                                 for n in check(headers, job(image, secret))]


def test_an_image_the_account_may_not_read_is_refused(vision, api_headers, eager_celery,
                                                      token_registry, registries_allowed):
    push_image(token_registry, "team/app")
    image = f"{token_registry.host}/team/app:v1"
    headers = api_headers("researcher")
    # a login the token service knows, for its own repositories (other/…) only
    secret = login_secret(headers, token_registry, OTHER_USER, name="other")
    detail = refused(launch(headers, job(image, secret)), "image_not_readable",
                     token_registry.passwords[OTHER_USER])
    assert detail == (f"{token_registry.host} does not let the login of the secret other pull "
                      f"{image}: the account may not read that repository.")


@pytest.mark.parametrize("reference", ["team/app:nope", "team/never-pushed:v1"])
def test_a_missing_tag_or_repository_is_refused(reference, vision, api_headers, eager_celery,
                                                htpasswd_registry, registries_allowed):
    push_image(htpasswd_registry, "team/app")
    image = f"{htpasswd_registry.host}/{reference}"
    headers = api_headers("researcher")
    secret = login_secret(headers, htpasswd_registry)
    detail = refused(launch(headers, job(image, secret)), "image_not_found",
                     htpasswd_registry.passwords[TEAM_USER])
    assert detail == (f"{htpasswd_registry.host} has no image {image}: check the image's name "
                      "and tag.")


def test_a_registry_outside_the_sites_registries_is_refused_whatever_the_secret(
        vision, api_headers, eager_celery, token_registry, registries_allowed, settings):
    push_image(token_registry, "team/app")
    image = f"{token_registry.host}/team/app:v1"
    headers = api_headers("researcher")
    secret = login_secret(headers, token_registry)  # made while the registry was allowed
    settings.PORTAL_IMAGE_REGISTRIES = ["registry.example.org"]
    assert token_registry.server.tokens is not None
    asked = token_registry.server.tokens.requests
    answer = launch(headers, job(image, secret))
    assert answer.status_code == 400, answer.json()
    assert answer.json()["fields"]["image"] == [
        "Images must come from the site's registries: registry.example.org."]
    assert token_registry.server.tokens.requests == asked  # the registry was not asked
    assert not Workload.objects.exists()


@contextlib.contextmanager
def silent_registry():
    """A port that takes connections and never answers them: a registry that hangs."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        yield f"127.0.0.1:{listener.getsockname()[1]}"


def test_a_registry_that_does_not_answer_is_a_warning_and_the_launch_goes_ahead(
        vision, api_headers, eager_celery, settings):
    headers = api_headers("researcher")
    with silent_registry() as host:
        settings.PORTAL_IMAGE_REGISTRIES = [host]
        settings.PORTAL_REGISTRY_CHECK_SECONDS = 1
        secret = secret_made(headers, "team", kind="registry",
                             data={"server": host, "username": "u", "password": "pw-9f3c1"})
        image = f"{host}/team/app:v1"
        notes = check(headers, job(image, secret))
        assert ("warning", f"{host} could not be asked for {image} (no answer within 1 s); the "
                           "launch goes ahead unchecked.") in \
            [(n["level"], n["message"]) for n in notes]
        started = time.monotonic()
        answer = launch(headers, job(image, secret))
        elapsed = time.monotonic() - started
    assert answer.status_code == 201, answer.json()
    assert elapsed < 10, f"the launch waited {elapsed:.1f} s on a registry bound to 1 s"


def test_the_launch_page_shows_the_registrys_refusal_under_the_image(
        researcher, vision_lab, api_headers, htpasswd_registry, registries_allowed, caplog):
    Template.objects.filter(slug="jupyter").update(image_replaceable=True)
    push_image(htpasswd_registry, "team/notebook")
    user = new_account(htpasswd_registry)
    secret = login_secret(api_headers("researcher"), htpasswd_registry, user)
    wrong = rotate_password(htpasswd_registry, user)
    image = f"{htpasswd_registry.host}/team/notebook:v1"
    response = researcher.post("/workloads/new/", launch_form(image=image,
                                                              secrets=[str(secret)]))
    assert response.status_code == 400
    assert field_error(response.content.decode(), "image") == (
        f"<p>{htpasswd_registry.host} refused the login of the secret team: check its user and "
        "password (replace the secret&#x27;s value).</p>")
    assert wrong not in response.content.decode() and wrong not in caplog.text
    assert not Workload.objects.exists()


def test_the_secrets_page_refuses_a_login_the_registry_refuses(researcher, vision_lab,
                                                               htpasswd_registry,
                                                               registries_allowed):
    wrong = f"not-{htpasswd_registry.passwords[TEAM_USER]}"
    response = researcher.post("/secrets/", {"name": "team", "kind": "registry", "scope": "user",
                                             "server": htpasswd_registry.host,
                                             "username": TEAM_USER, "password": wrong})
    assert response.status_code == 400
    page = response.content.decode()
    assert f"{htpasswd_registry.host} refused this user and password" in page
    assert wrong not in page
    assert not Secret.objects.exists()
