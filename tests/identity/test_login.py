"""Login, project switch, logout, expiry and revocation against the real Keystone."""

import datetime as dt

import pytest
import time_machine
from django.contrib.auth import get_user_model
from django.test import Client

from identity import identity as identity_store
from identity.client import KeystoneClient, TokenInvalid
from identity.middleware import EXPIRED_MESSAGE, REVOKED_MESSAGE
from identity.views import REJECTED, UNREACHABLE
from tenants.models import Tenant

pytestmark = pytest.mark.django_db


def session_identity(client: Client):
    return identity_store.load(client.session)


def project_names(client: Client) -> list[str]:
    return [p.name for p in session_identity(client).projects]


def test_researcher_sees_both_projects_and_can_switch(login, keystone):
    client = login("researcher")
    assert project_names(client) == ["nlp-lab", "vision-lab"]
    ident = session_identity(client)
    first = ident.project.name
    other = "vision-lab" if first == "nlp-lab" else "nlp-lab"
    page = client.get("/")
    assert page.status_code == 200
    assert first in page.content.decode()

    old_token = ident.scoped.id
    response = client.post("/switch-project/", {"project_id": keystone.project_ids[other]})
    assert response.status_code == 302
    ident = session_identity(client)
    assert ident.project.name == other
    assert ident.scoped.project_id == keystone.project_ids[other]
    assert ident.scoped.id != old_token  # a new project-scoped token per switch
    # the previous project token was revoked in Keystone
    with pytest.raises(TokenInvalid):
        KeystoneClient().validate(old_token)
    assert f"Switched to project {other}" in client.get("/").content.decode()


def test_the_next_login_starts_in_the_last_project(login, keystone):
    client = login("researcher")
    client.post("/switch-project/", {"project_id": keystone.project_ids["vision-lab"]})
    client.post("/logout/")
    again = login("researcher")
    assert session_identity(again).project.name == "vision-lab"
    again.post("/switch-project/", {"project_id": keystone.project_ids["nlp-lab"]})
    assert session_identity(login("researcher")).project.name == "nlp-lab"


def test_switch_to_a_project_not_yours_is_refused(login, keystone):
    client = login("student")  # nlp-lab only
    response = client.post("/switch-project/", {"project_id": keystone.project_ids["vision-lab"]},
                           follow=True)
    assert "That is not one of your projects." in response.content.decode()
    assert session_identity(client).project.name == "nlp-lab"


def test_viewer_sees_only_vision_lab_as_reader(login):
    client = login("viewer")
    ident = session_identity(client)
    assert project_names(client) == ["vision-lab"]
    assert ident.role.label == "reader"
    assert not ident.is_admin
    assert "you can see this project" in client.get("/").content.decode()


def test_lead_is_manager_of_vision_lab(login):
    ident = session_identity(login("lead"))
    assert ident.project.name == "vision-lab"
    assert ident.role.label == "manager"


def test_admin_is_a_portal_admin(login):
    client = login("admin")
    ident = session_identity(client)
    assert ident.is_admin
    assert ident.role.label == "admin"
    user = get_user_model().objects.get(name="admin")
    assert user.is_staff and user.is_superuser
    assert "portal administrator" in client.get("/").content.decode()


def test_login_records_tenants_and_mirrors_the_user_without_a_password(login, keystone):
    login("researcher")
    user = get_user_model().objects.get(name="researcher")
    assert user.keystone_user_id
    assert not user.has_usable_password()
    assert set(Tenant.objects.values_list("name", flat=True)) >= {"vision-lab", "nlp-lab"}
    tenant = Tenant.objects.get(keystone_project_id=keystone.project_ids["vision-lab"])
    assert tenant.namespace.startswith("gpu-vision-lab-")


def test_tokens_stay_on_the_server_and_the_session_id_changes_at_login(keystone, db):
    client = Client()
    client.get("/login/")
    client.cookies["gpuportal_sessionid"] = "attacker-chosen-id"
    response = client.post("/login/", {"username": "researcher",
                                       "password": "researcher-demo-pass", "domain": "Default"})
    cookie = response.cookies["gpuportal_sessionid"]
    assert cookie.value != "attacker-chosen-id"
    assert cookie["httponly"]
    token = session_identity(client).scoped.id
    for morsel in response.cookies.values():
        assert token not in morsel.value


def test_wrong_password_says_nothing_about_which_part(keystone, db):
    client = Client()
    for username in ("researcher", "nobody-at-all"):
        response = client.post("/login/", {"username": username, "password": "wrong",
                                           "domain": "Default"})
        assert response.status_code == 401
        body = response.content.decode()
        assert REJECTED in body
        assert "password" not in body.split(REJECTED)[0].lower().split("<form")[-1]
    assert not client.session.get(identity_store.SESSION_KEY)


def test_repeated_failures_are_throttled_per_user_and_address(keystone, db, settings):
    client = Client()
    for _ in range(settings.AXES_FAILURE_LIMIT):
        client.post("/login/", {"username": "student", "password": "nope", "domain": "Default"})
    locked = client.post("/login/", {"username": "student", "password": "student-demo-pass",
                                     "domain": "Default"})
    assert locked.status_code == 429
    assert "Too many failed logins" in locked.content.decode()
    # another address is not locked out for the same user
    other = Client(REMOTE_ADDR="10.9.8.7")
    assert other.post("/login/", {"username": "student", "password": "student-demo-pass",
                                  "domain": "Default"}).status_code == 302
    # nor is another user from the first address
    assert client.post("/login/", {"username": "viewer", "password": "viewer-demo-pass",
                                   "domain": "Default"}).status_code == 302


def test_the_throttle_ignores_the_user_names_case(keystone, db, settings):
    client = Client()
    for username in ("student", "Student", "STUDENT", " student", "ＳＴＵＤＥＮＴ")[
            :settings.AXES_FAILURE_LIMIT]:
        client.post("/login/", {"username": username, "password": "nope", "domain": "Default"})
    for username in ("student", "Student", "sTuDeNt"):
        locked = client.post("/login/", {"username": username, "password": "student-demo-pass",
                                         "domain": "Default"})
        assert locked.status_code == 429, username


def test_logout_revokes_the_tokens_in_keystone(login):
    client = login("researcher")
    ident = session_identity(client)
    assert KeystoneClient().validate(ident.scoped.id).project_id == ident.scoped.project_id
    response = client.post("/logout/")
    assert response.status_code == 302
    for token in (ident.scoped.id, ident.unscoped.id):
        with pytest.raises(TokenInvalid):
            KeystoneClient().validate(token)
    assert client.get("/").status_code == 302


def test_a_token_revoked_in_keystone_ends_the_session(login, keystone, settings):
    settings.KEYSTONE_TOKEN_CACHE_TTL = 0  # ask Keystone on every request
    client = login("researcher")
    token = session_identity(client).scoped.id
    keystone.admin().tokens.revoke_token(token)  # Keystone's own API, as an operator would
    response = client.get("/")
    assert response.status_code == 302 and response.url.startswith("/login/")
    assert REVOKED_MESSAGE in client.get(response.url).content.decode()


def test_an_expired_token_ends_the_session(login):
    client = login("researcher")
    expires = session_identity(client).expires_at
    with time_machine.travel(expires + dt.timedelta(seconds=1), tick=False):
        response = client.get("/")
        assert response.status_code == 302 and response.url.startswith("/login/")
        assert EXPIRED_MESSAGE in client.get(response.url).content.decode()


def test_keystone_unreachable_at_login_is_said_plainly(keystone, db, settings):
    settings.KEYSTONE_URL = "http://127.0.0.1:9/v3"  # nothing listens on the discard port
    response = Client().post("/login/", {"username": "researcher",
                                         "password": "researcher-demo-pass", "domain": "Default"})
    assert response.status_code == 503
    assert UNREACHABLE in response.content.decode()


def test_pages_keep_working_while_keystone_is_unreachable(login, settings):
    client = login("researcher")
    settings.KEYSTONE_TOKEN_CACHE_TTL = 0
    settings.KEYSTONE_URL = "http://127.0.0.1:9/v3"
    response = client.get("/")
    assert response.status_code == 200
    assert session_identity(client).project is not None


def test_a_user_without_projects_gets_a_page_that_says_so(login):
    client = login("loner")
    response = client.get("/")
    assert response.status_code == 200
    assert "You have no project yet" in response.content.decode()
