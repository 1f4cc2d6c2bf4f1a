"""The secrets' sweep (credentials.services.secrets_sweep, the beat's every 5 minutes): a
secret whose Kubernetes Secret is gone — its project's namespace was deleted and made again,
taking the value, which was kept nowhere else — is marked lost, its owner told once, and
refused by a launch until it is given a new value, which makes its Secret anew; a Secret no row
holds (a project the portal no longer has, a row deleted while the cluster did not answer) is
deleted; what was written in the last minutes is left alone."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from credentials.models import Secret
from credentials.services import secret_create, secret_replace, secrets_sweep
from kube.client import Kube
from kube.labels import LABEL_SECRET_ID, MANAGED_BY
from notifications.models import Notification
from workloads.models import Workload

pytestmark = pytest.mark.django_db

LATER = dt.timedelta(minutes=10)


def made(vision, name: str = "hf") -> Secret:
    researcher = get_user_model().objects.get(name="researcher")
    return secret_create(tenant=vision, acting_user=researcher, name=name, kind="env",
                         scope="user", data={"HF_TOKEN": "first"})


def test_a_secret_whose_value_is_gone_is_lost_until_given_again(vision, cluster,
                                                                project_token):
    secret, kept = made(vision), made(vision, "kept")
    kube = Kube()
    # the namespace made again: its Secrets are gone with it (here, the one object)
    assert kube.delete("Secret", secret.object_name, vision.namespace)
    # a value written just now is not judged: its object may not be listed yet
    assert secrets_sweep().lost == []
    swept = secrets_sweep(now=timezone.now() + LATER)
    assert swept.lost == [secret.pk]
    secret.refresh_from_db()
    assert secret.state == "lost" and Secret.objects.get(pk=kept.pk).state == "ok"
    told, = Notification.objects.filter(kind="secret")
    assert told.user == secret.owner and "hf" in told.title
    assert secrets_sweep(now=timezone.now() + LATER).lost == []  # once

    token = project_token("researcher", "vision-lab")
    client = Client(HTTP_X_AUTH_TOKEN=token)
    shown = client.get(f"/api/v1/secrets/{secret.pk}/").json()
    assert shown["state"] == "lost" and shown["lost_at"]
    launched = client.post("/api/v1/workloads/", {
        "name": "probe", "template": "jupyter", "gpu_type": "a100", "gpu_count": 1,
        "secrets": [{"secret": secret.pk}]}, content_type="application/json")
    assert launched.status_code == 400, launched.content
    assert "was lost" in launched.json()["fields"]["secrets"][0]
    assert not Workload.objects.exists()

    secret_replace(secret=secret, acting_user=secret.owner, data={"HF_TOKEN": "second"})
    secret.refresh_from_db()
    assert secret.state == "ok"
    assert kube.get("Secret", secret.object_name, vision.namespace) is not None


def test_a_secret_no_row_holds_is_deleted(vision, cluster):
    secret = made(vision)
    kube = Kube()
    stray = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
             "metadata": {"name": "portal-secret-999999", "namespace": vision.namespace,
                          "labels": {**MANAGED_BY, LABEL_SECRET_ID: "999999"}},
             "stringData": {"HF_TOKEN": "left behind"}}
    kube.create(stray)
    # (the shared namespace may hold Secrets earlier tests made, whose rows are gone with
    # their transactions: old strays, deleted alike by either sweep)
    first = secrets_sweep().deleted
    # made just now: perhaps a write not committed yet
    assert (vision.namespace, "portal-secret-999999") not in first
    assert (vision.namespace, secret.object_name) not in first
    swept = secrets_sweep(now=timezone.now() + LATER)
    assert (vision.namespace, "portal-secret-999999") in swept.deleted
    assert (vision.namespace, secret.object_name) not in swept.deleted
    assert kube.get("Secret", "portal-secret-999999", vision.namespace) is None
    assert kube.get("Secret", secret.object_name, vision.namespace) is not None
    assert swept.lost == []
