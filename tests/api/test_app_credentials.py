"""Keystone application credentials: a script exchanges one for a token and uses the API with
it; revocation (of a token, of the credential) takes effect within the cache TTL."""

from __future__ import annotations

import time
import uuid

import pytest
from django.test import Client
from keystoneauth1 import session as ks_session
from keystoneauth1.identity import v3

from tests.support.gpuctl import user_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def app_credential(keystone):
    """Creates application credentials for a demo user through Keystone's API; deletes them."""
    made = []

    def _create(username: str, project: str, roles: list[str] | None = None):
        ks = user_client(keystone, username, project)
        user_id = ks.session.get_user_id()
        kwargs = {"roles": [{"name": role} for role in roles]} if roles else {}
        credential = ks.application_credentials.create(
            name=f"gpuctl-test-{uuid.uuid4().hex[:8]}", user=user_id,
            description="made by tests/api/test_app_credentials.py", **kwargs)
        made.append((ks, user_id, credential.id))
        return credential

    yield _create
    for ks, user_id, credential_id in made:
        try:
            ks.application_credentials.delete(credential_id, user=user_id)
        except Exception:
            pass  # the test deleted it already


def exchange(keystone, credential) -> str:
    """What a script does: keystoneauth1's ApplicationCredential plugin → a token."""
    auth = v3.ApplicationCredential(auth_url=keystone.url,
                                    application_credential_id=credential.id,
                                    application_credential_secret=credential.secret)
    return auth.get_access(ks_session.Session(auth=auth)).auth_token


def test_an_application_credential_gives_a_token_scoped_to_its_project(keystone, app_credential):
    credential = app_credential("researcher", "nlp-lab")
    token = exchange(keystone, credential)
    response = Client().get("/api/v1/me/", HTTP_X_AUTH_TOKEN=token)
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["user_name"] == "researcher"
    assert body["project"]["id"] == keystone.project_ids["nlp-lab"]
    assert body["role"] == "member"
    listing = Client().get("/api/v1/workloads/", HTTP_X_AUTH_TOKEN=token)
    assert listing.status_code == 200 and "results" in listing.json()


def test_a_credential_limited_to_reader_cannot_launch(keystone, app_credential, gpu_types):
    credential = app_credential("researcher", "vision-lab", roles=["reader"])
    token = exchange(keystone, credential)
    me = Client().get("/api/v1/me/", HTTP_X_AUTH_TOKEN=token).json()
    assert me["role"] == "reader"
    response = Client().post("/api/v1/workloads/", {"name": "x", "template": "jupyter",
                                                    "gpu_type": "a100", "gpu_count": 1},
                             content_type="application/json", HTTP_X_AUTH_TOKEN=token)
    assert response.status_code == 403
    assert response.json()["code"] == "permission_denied"


def test_deleting_the_credential_ends_its_tokens_within_the_ttl(keystone, app_credential,
                                                                settings):
    settings.KEYSTONE_TOKEN_CACHE_TTL = 1
    credential = app_credential("student", "nlp-lab")
    token = exchange(keystone, credential)
    client = Client()
    assert client.get("/api/v1/me/", HTTP_X_AUTH_TOKEN=token).status_code == 200
    user_client(keystone, "student", "nlp-lab").application_credentials.delete(
        credential.id, user=credential.user_id)
    time.sleep(1.2)  # the cache entry lapses: Keystone is asked again and refuses
    response = client.get("/api/v1/me/", HTTP_X_AUTH_TOKEN=token)
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Keystone uri=")


def test_a_revoked_token_is_refused_once_the_short_ttl_passes(keystone, project_token, settings):
    settings.KEYSTONE_TOKEN_CACHE_TTL = 1
    token = project_token("viewer", "vision-lab")
    client = Client()
    assert client.get("/api/v1/me/", HTTP_X_AUTH_TOKEN=token).status_code == 200
    keystone.admin().tokens.revoke_token(token)
    time.sleep(1.2)
    assert client.get("/api/v1/me/", HTTP_X_AUTH_TOKEN=token).status_code == 401


def test_a_wrong_secret_gets_no_token(keystone, app_credential):
    from keystoneauth1 import exceptions as ks_exceptions

    credential = app_credential("student", "nlp-lab")
    auth = v3.ApplicationCredential(auth_url=keystone.url,
                                    application_credential_id=credential.id,
                                    application_credential_secret="not-the-secret")
    with pytest.raises(ks_exceptions.Unauthorized):
        auth.get_access(ks_session.Session(auth=auth))
