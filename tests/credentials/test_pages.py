"""The Secrets page and the launch page's secrets: make, replace, delete; a value typed is never
shown again (not even on a form sent back with an error); roles and another project's 404; a
notebook launched with a secret lists it by name, and no page shows its value."""

from __future__ import annotations

import pytest

from credentials.models import Secret
from kube.client import Kube
from tests.support.pages import field_error, launch_form
from tests.support.secrets import VALUE
from workloads.models import Workload

pytestmark = pytest.mark.django_db


def env_form(**changes) -> dict:
    return {"name": "hf", "kind": "env", "scope": "user", "env": f"HF_TOKEN={VALUE}", **changes}


def test_a_member_makes_replaces_and_deletes_a_secret(researcher, vision_lab):
    empty = researcher.get("/secrets/")
    assert empty.status_code == 200 and "No secret yet." in empty.content.decode()
    made = researcher.post("/secrets/", env_form())
    assert made.status_code == 302, made.content.decode()[:2000]
    secret = Secret.objects.get(name="hf")
    listed = researcher.get("/secrets/", follow=True).content.decode()
    assert f'<a href="/secrets/{secret.pk}/">hf</a>' in listed and "<code>HF_TOKEN</code>" in listed
    assert VALUE not in listed
    detail = researcher.get(f"/secrets/{secret.pk}/").content.decode()
    assert "Replace its data" in detail and VALUE not in detail
    replaced = researcher.post(f"/secrets/{secret.pk}/", {"env": "WANDB_API_KEY=w\nHF_TOKEN=x"})
    assert replaced.status_code == 302
    secret.refresh_from_db()
    assert secret.keys == ["HF_TOKEN", "WANDB_API_KEY"]
    assert researcher.post(f"/secrets/{secret.pk}/delete/").status_code == 302
    assert not Secret.objects.exists()
    assert Kube().get("Secret", secret.object_name, vision_lab.namespace) is None


def test_a_refused_form_never_shows_the_value_back(researcher, vision_lab):
    refused = researcher.post("/secrets/", env_form(name="Not A Name"))
    assert refused.status_code == 400
    page = refused.content.decode()
    assert "lower-case letters" in page and VALUE not in page
    s3 = researcher.post("/secrets/", {"name": "lake", "kind": "s3", "scope": "user",
                                       "endpoint": "ftp://x", "bucket": "data",
                                       "access_key": VALUE, "secret_key": VALUE})
    assert s3.status_code == 400
    assert "endpoint is the S3 server" in s3.content.decode() and VALUE not in s3.content.decode()
    assert not Secret.objects.exists()


def test_the_project_secrets_are_the_managers_to_write(researcher, vision_lab, as_user):
    assert researcher.post("/secrets/", env_form(scope="project")).status_code == 403
    lead = as_user("lead")
    assert lead.post("/secrets/", env_form(name="shared", scope="project")).status_code == 302
    shared = Secret.objects.get(name="shared")
    page = researcher.get(f"/secrets/{shared.pk}/").content.decode()
    assert "Replace its data" not in page
    assert researcher.post(f"/secrets/{shared.pk}/", {"env": "A=b"}).status_code == 403
    assert researcher.post(f"/secrets/{shared.pk}/delete/").status_code == 403
    viewer = as_user("viewer")
    listing = viewer.get("/secrets/").content.decode()
    assert "shared" in listing and "New secret" not in listing
    assert viewer.post("/secrets/", env_form()).status_code == 403
    # a user's own is nobody else's, the manager's neither
    assert researcher.post("/secrets/", env_form()).status_code == 302
    own = Secret.objects.get(name="hf")
    assert lead.get(f"/secrets/{own.pk}/").status_code == 404
    assert as_user("student", "nlp-lab").get(f"/secrets/{shared.pk}/").status_code == 404


def test_a_notebook_launched_with_a_secret_lists_it_by_name(researcher, vision_lab):
    researcher.post("/secrets/", env_form())
    secret = Secret.objects.get(name="hf")
    launch_page = researcher.get("/workloads/new/").content.decode()
    assert f'name="secrets" value="{secret.pk}"' in launch_page
    response = researcher.post("/workloads/new/", launch_form(secrets=[str(secret.pk)]))
    assert response.status_code == 302, field_error(response.content.decode(), "secrets")
    workload = Workload.objects.get(name="notebook")
    page = researcher.get(f"/workloads/{workload.pk}/").content.decode()
    assert '<dd id="workload-secrets"><code>hf</code>' in page
    assert VALUE not in page
    for path in ("/workloads/", "/secrets/", f"/secrets/{secret.pk}/", "/workloads/new/"):
        assert VALUE not in researcher.get(path).content.decode(), path


def test_the_launch_page_refuses_a_secret_it_may_not_use(researcher, vision_lab, as_user):
    lead = as_user("lead")
    researcher.post("/secrets/", env_form())
    own = Secret.objects.get(name="hf")
    refused = lead.post("/workloads/new/", launch_form(secrets=[str(own.pk)]))
    assert refused.status_code == 400
    assert "no secret" in field_error(refused.content.decode(), "secrets")
    assert not Workload.objects.exists()
