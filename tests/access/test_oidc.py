"""The portal as the OpenID Connect provider of a workload's proxy, driven as oauth2-proxy
drives it (authorization code with PKCE, then refreshes), against the real Keystone: who gets a
code, what the ID token says, and which refreshes are refused (`invalid_grant`, on which the
proxy drops its session)."""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
from urllib.parse import parse_qs, urlencode, urlparse

import pytest
from django.test import Client
from jwcrypto import jwk, jwt

from access import services as access_services
from access.models import TenantServiceAccess
from audit.models import AuditRecord
from identity import assignments
from tests.workloads.api_calls import launch, vision_lab_ready
from workloads.models import ProxySession, Workload

pytestmark = pytest.mark.django_db

JUPYTER = {"name": "nb", "template": "jupyter", "gpu_type": "a100", "gpu_count": 1}
ADDRESS = "10.20.0.7"


@pytest.fixture
def vision(login, gpu_types, cluster):
    return vision_lab_ready(login)


@pytest.fixture
def notebook(vision, project_token):
    """researcher's Jupyter with its load-balancer address assigned."""
    response = launch({"HTTP_X_AUTH_TOKEN": project_token("researcher", "vision-lab")}, JUPYTER)
    assert response.status_code == 201, response.json()
    workload = Workload.objects.get(pk=response.json()["id"])
    Workload.objects.filter(pk=workload.pk).update(address=ADDRESS)
    workload.refresh_from_db()
    return workload


@pytest.fixture
def no_role_cache(monkeypatch):
    monkeypatch.setattr(assignments, "ASSIGNMENT_CACHE_SECONDS", 0.001)


class Proxy:
    """What oauth2-proxy sends the portal, for one workload."""

    def __init__(self, workload: Workload):
        self.client_id = workload.access.client_id
        self.secret = access_services.client_secret_for(self.client_id)
        self.callback = f"http://{workload.address}:{workload.port}/oauth2/callback"

    def authorize(self, browser: Client, *, redirect_uri: str | None = None):
        self.verifier = secrets.token_urlsafe(48)
        challenge = base64.urlsafe_b64encode(
            hashlib.sha256(self.verifier.encode()).digest()).decode().rstrip("=")
        self.state = secrets.token_hex(8)
        query = {"response_type": "code", "client_id": self.client_id,
                 "redirect_uri": redirect_uri or self.callback, "scope": "openid email profile",
                 "state": self.state, "code_challenge": challenge,
                 "code_challenge_method": "S256"}
        return browser.get("/o/authorize/?" + urlencode(query))

    def code_from(self, response) -> str:
        assert response.status_code == 302, response.content[:500]
        target = urlparse(response["Location"])
        assert f"{target.scheme}://{target.netloc}{target.path}" == self.callback
        params = parse_qs(target.query)
        assert params["state"] == [self.state]
        return params["code"][0]

    def redeem(self, code: str) -> dict:
        response = Client().post("/o/token/", {
            "grant_type": "authorization_code", "code": code, "redirect_uri": self.callback,
            "client_id": self.client_id, "client_secret": self.secret,
            "code_verifier": self.verifier})
        assert response.status_code == 200, response.content
        return response.json()

    def refresh(self, tokens: dict):
        return Client().post("/o/token/", {
            "grant_type": "refresh_token", "refresh_token": tokens["refresh_token"],
            "client_id": self.client_id, "client_secret": self.secret})


def _claims(token: str) -> dict:
    keys = jwk.JWKSet.from_json(Client().get("/o/.well-known/jwks.json").content.decode())
    return json.loads(jwt.JWT(jwt=token, key=keys).claims)


def test_a_member_signs_in_and_the_id_token_names_them_for_this_workload(login, notebook):
    proxy = Proxy(notebook)
    tokens = proxy.redeem(proxy.code_from(proxy.authorize(login("researcher"))))
    claims = _claims(tokens["id_token"])
    assert claims["aud"] == proxy.client_id
    assert claims["iss"].endswith("/o")
    assert claims["preferred_username"] == "researcher"
    assert claims["email"] and claims["email_verified"] is True
    assert ProxySession.objects.filter(workload=notebook, user__name="researcher",
                                       token_family__isnull=False).count() == 1
    # the proxy's refresh a minute later: still allowed, new tokens
    refreshed = proxy.refresh(tokens)
    assert refreshed.status_code == 200, refreshed.content
    assert refreshed.json()["refresh_token"] != tokens["refresh_token"]


def test_a_signed_out_browser_is_sent_to_the_portal_login(notebook):
    response = Proxy(notebook).authorize(Client())
    assert response.status_code == 302
    assert response["Location"].startswith("/login/?next=/o/authorize/")


def test_another_project_s_member_gets_a_403_page(login, notebook, caplog):
    response = Proxy(notebook).authorize(login("student"))
    assert response.status_code == 403
    assert b"You may not open nb" in response.content
    assert b"no role in the workload" in response.content
    assert "workload access refused" in caplog.text


def test_the_project_rule_decides_for_readers(login, notebook):
    proxy = Proxy(notebook)
    viewer = login("viewer")
    refused = proxy.authorize(viewer)
    assert refused.status_code == 403 and b"you are a reader" in refused.content
    access_services.service_access_update(tenant=notebook.tenant, actor=None, who="readers")
    assert proxy.code_from(proxy.authorize(viewer))
    # owner only: the lead (manager) still gets in, another member would not
    access_services.service_access_update(tenant=notebook.tenant, actor=None, who="owner")
    assert proxy.authorize(viewer).status_code == 403
    assert proxy.code_from(proxy.authorize(login("lead")))
    assert AuditRecord.objects.filter(action="tenant.service_access").count() == 2


def test_a_workload_with_its_owners_own_data_opens_to_its_owner_and_managers_only(
        login, vision, project_token):
    """A notebook that reads its owner's own secret (or mounts their own volume) hands it to
    whoever opens it: the project's rule does not widen it. With a project secret, the rule
    decides as for any workload."""
    from django.utils.html import escape

    from access.rules import PRIVATE_REFUSAL
    from tests.support.secrets import secret_made
    from workloads.access import holds_owners_own_data

    headers = {"HTTP_X_AUTH_TOKEN": project_token("researcher", "vision-lab")}
    lead = {"HTTP_X_AUTH_TOKEN": project_token("lead", "vision-lab")}
    notebooks = {}
    for scope, who_makes in (("user", headers), ("project", lead)):
        secret = secret_made(who_makes, f"hf-{scope}", scope=scope)
        response = launch(headers, {**JUPYTER, "name": f"nb-{scope}",
                                    "secrets": [{"secret": secret}]})
        assert response.status_code == 201, response.json()
        Workload.objects.filter(pk=response.json()["id"]).update(address=ADDRESS)
        notebooks[scope] = Workload.objects.get(pk=response.json()["id"])
    assert holds_owners_own_data(notebooks["user"])
    assert not holds_owners_own_data(notebooks["project"])
    access_services.service_access_update(tenant=notebooks["user"].tenant, actor=None,
                                          who="readers")
    viewer = login("viewer")
    refused = Proxy(notebooks["user"]).authorize(viewer)
    assert refused.status_code == 403 and escape(PRIVATE_REFUSAL) in refused.content.decode()
    shared = Proxy(notebooks["project"])
    assert shared.code_from(shared.authorize(viewer))
    for user in ("lead", "researcher"):
        proxy = Proxy(notebooks["user"])
        assert proxy.code_from(proxy.authorize(login(user)))


def test_a_code_goes_only_to_the_workload_s_own_address(login, notebook):
    response = Proxy(notebook).authorize(login("researcher"),
                                         redirect_uri="http://evil.example:8888/oauth2/callback")
    assert response.status_code == 400  # django-oauth-toolkit's error page, no redirect
    assert "code=" not in response.get("Location", "")


def test_signing_out_of_the_portal_ends_the_proxy_session_at_its_next_refresh(login, notebook):
    browser = login("researcher")
    proxy = Proxy(notebook)
    tokens = proxy.redeem(proxy.code_from(proxy.authorize(browser)))
    browser.post("/logout/")
    refused = proxy.refresh(tokens)
    assert refused.status_code == 400
    assert refused.json()["error"] == "invalid_grant"
    session = ProxySession.objects.get(workload=notebook)
    assert session.ended_reason == "the portal session it came from has ended"


def test_a_user_removed_from_the_project_is_refused_at_the_next_refresh(
        login, notebook, no_role_cache, temporary_member):
    user = temporary_member(notebook.tenant.keystone_project_id)
    proxy = Proxy(notebook)
    tokens = proxy.redeem(proxy.code_from(proxy.authorize(login(user.name))))
    assert proxy.refresh(tokens).status_code == 200
    user.remove()
    refused = proxy.refresh(tokens)
    assert refused.status_code == 400 and refused.json()["error"] == "invalid_grant"


def test_a_stopped_workload_refuses_refreshes(login, notebook):
    proxy = Proxy(notebook)
    tokens = proxy.redeem(proxy.code_from(proxy.authorize(login("researcher"))))
    Workload.objects.filter(pk=notebook.pk).update(state=Workload.State.STOPPED)
    assert proxy.refresh(tokens).json()["error"] == "invalid_grant"


def test_a_bearer_token_for_scripts_names_the_workload_and_lives_a_minute(notebook, project_token):
    headers = {"HTTP_X_AUTH_TOKEN": project_token("researcher", "vision-lab")}
    response = Client().post(f"/api/v1/workloads/{notebook.pk}/access-token/", **headers)
    assert response.status_code == 201, response.json()
    body = response.json()
    claims = _claims(body["token"])
    assert claims["aud"] == notebook.access.client_id
    assert claims["exp"] - claims["iat"] == 60
    assert body["token_type"] == "Bearer" and 55 <= body["expires_in"] <= 60
    assert body["url"] == f"http://{ADDRESS}:8888/lab"
    # a reader (members only by default) gets none; another project does not see it at all
    viewer = {"HTTP_X_AUTH_TOKEN": project_token("viewer", "vision-lab")}
    refused = Client().post(f"/api/v1/workloads/{notebook.pk}/access-token/", **viewer)
    assert refused.status_code == 403 and refused.json()["code"] == "access_denied"
    student = {"HTTP_X_AUTH_TOKEN": project_token("student", "nlp-lab")}
    assert Client().post(f"/api/v1/workloads/{notebook.pk}/access-token/",
                         **student).status_code == 404


def test_public_needs_an_admin_s_leave_and_is_audited(vision, project_token):
    headers = {"HTTP_X_AUTH_TOKEN": project_token("researcher", "vision-lab")}
    refused = launch(headers, {**JUPYTER, "public": True})
    assert refused.status_code == 400
    assert "admin" in refused.json()["fields"]["public"][0]
    TenantServiceAccess.objects.update_or_create(tenant=vision, defaults={
        "who": "members", "allow_public": True})
    accepted = launch(headers, {**JUPYTER, "public": True})
    assert accepted.status_code == 201
    assert accepted.json()["access"] == {"protected": False, "public": True, "who": "members",
                                         "who_label": "members of the project (and managers, "
                                                      "admins)"}
    assert AuditRecord.objects.filter(action="workload.public", tenant=vision).count() == 1
    batch = launch(headers, {"name": "job", "template": "custom", "kind": "batch",
                             "image": "busybox:1.36", "gpu_type": "a100", "gpu_count": 1,
                             "public": True})
    assert batch.status_code == 400 and "batch" in batch.json()["fields"]["public"][0]


def test_only_managers_change_the_rule_and_only_admins_allow_public(vision, project_token):
    path = f"/api/v1/tenants/{vision.pk}/service-access/"

    def patch(user: str, body: dict):
        headers = {"HTTP_X_AUTH_TOKEN": project_token(user, "vision-lab" if user != "admin"
                                                      else "admin")}
        return Client().patch(path, body, content_type="application/json", **headers)

    assert patch("researcher", {"who": "readers"}).status_code == 403
    changed = patch("lead", {"who": "readers"})
    assert changed.status_code == 200 and changed.json() == {"who": "readers",
                                                             "allow_public": False,
                                                             "ssh_enabled": True}
    assert patch("lead", {"allow_public": True}).status_code == 403
    assert patch("admin", {"allow_public": True}).json()["allow_public"] is True
    assert patch("lead", {"who": "everyone"}).status_code == 400


def test_with_a_certificate_the_address_and_the_callback_are_https(login, notebook, settings):
    settings.PORTAL_AUTH_PROXY_TLS_SECRET = "workloads-tls"
    assert notebook.url == f"https://{ADDRESS}:8888/lab"
    proxy = Proxy(notebook)
    browser = login("researcher")
    assert proxy.authorize(browser).status_code == 400  # the http:// callback is not its own
    proxy.callback = f"https://{ADDRESS}:8888/oauth2/callback"
    assert proxy.code_from(proxy.authorize(browser))


def test_a_custom_service_on_the_proxy_s_port_gets_its_proxy_beside_it(vision, project_token):
    from workloads.manifests import workload_objects
    from workloads.objects import workload_spec

    response = launch({"HTTP_X_AUTH_TOKEN": project_token("researcher", "vision-lab")}, {
        "name": "api", "template": "custom", "kind": "service", "image": "busybox:1.36",
        "port": 4180, "gpu_type": "a100", "gpu_count": 1})
    assert response.status_code == 201, response.json()
    spec = workload_spec(Workload.objects.get(pk=response.json()["id"]))
    assert (spec.proxy.upstream_port, spec.proxy.listen_port) == (4180, 4181)
    deployment = next(o for o in workload_objects(spec) if o["kind"] == "Deployment")
    ports = {c["name"]: c["ports"][0]["containerPort"]
             for c in deployment["spec"]["template"]["spec"]["containers"]}
    assert ports == {"app": 4180, "auth-proxy": 4181}


def test_a_list_of_workloads_costs_no_query_per_workload_for_their_access(
        vision, project_token, django_assert_max_num_queries):
    headers = {"HTTP_X_AUTH_TOKEN": project_token("researcher", "vision-lab")}
    for n in range(4):
        assert launch(headers, {**JUPYTER, "name": f"nb{n}"}).status_code == 201
    Client().get("/api/v1/workloads/", **headers)  # the token validated and cached
    with django_assert_max_num_queries(8):
        listed = Client().get("/api/v1/workloads/", **headers).json()
    assert listed["count"] == 4
    assert all(row["access"]["protected"] for row in listed["results"])


# --- the client a request is for: the one the library acts on, checked again where the code
# is saved and redeemed ---------------------------------------------------------------------

def _authorization_form(proxy: Proxy) -> dict:
    """The consent form's fields as django-oauth-toolkit's AllowForm carries them, for `proxy`'s
    client: what a browser posts to /o/authorize/."""
    proxy.verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(
        hashlib.sha256(proxy.verifier.encode()).digest()).decode().rstrip("=")
    proxy.state = secrets.token_hex(8)
    return {"client_id": proxy.client_id, "redirect_uri": proxy.callback,
            "response_type": "code", "scope": "openid email profile", "state": proxy.state,
            "code_challenge": challenge, "code_challenge_method": "S256", "allow": "Authorize"}


def _no_code(response) -> bool:
    return "code=" not in response.get("Location", "")


@pytest.fixture
def own_notebook(vision, project_token, login):
    """A Jupyter of nlp-lab's student: a client the student may open (their own)."""
    from tenants.models import Tenant
    from tenants.provisioning import tenant_reconcile
    from tenants.services import quota_update

    login("student")
    nlp = Tenant.objects.get(name="nlp-lab")
    quota_update(tenant=nlp, acting_user=None,
                 changes={"gpus_total": 2, "gpus_by_type": {"a100": 2}})
    tenant_reconcile(tenant_id=nlp.pk)
    response = launch({"HTTP_X_AUTH_TOKEN": project_token("student", "nlp-lab")},
                      {**JUPYTER, "name": "mine"})
    assert response.status_code == 201, response.json()
    workload = Workload.objects.get(pk=response.json()["id"])
    Workload.objects.filter(pk=workload.pk).update(address="10.20.0.8")
    workload.refresh_from_db()
    return workload


@pytest.mark.parametrize("query", ["client_id=x", "client_id={own}", "client_id=&x=1"])
def test_a_post_whose_address_names_another_client_gets_no_code(login, notebook, own_notebook,
                                                                 query, caplog):
    """The body's client is the one the library issues a code for: a query naming another
    (unknown, empty, or one the student may open) no longer stands in for it."""
    proxy = Proxy(notebook)
    query = query.format(own=own_notebook.access.client_id)
    response = login("student").post(f"/o/authorize/?{query}", _authorization_form(proxy))
    assert response.status_code in (400, 403), response.content[:300]
    assert _no_code(response)
    assert not ProxySession.objects.filter(workload=notebook).exists()


def test_a_post_for_the_body_s_client_is_decided_by_the_rule(login, notebook):
    proxy = Proxy(notebook)
    refused = login("student").post("/o/authorize/", _authorization_form(proxy))
    assert refused.status_code == 403 and b"You may not open nb" in refused.content
    allowed = login("researcher").post("/o/authorize/", _authorization_form(proxy))
    assert proxy.code_from(allowed)


def test_a_parameter_given_twice_is_refused(login, notebook, own_notebook):
    proxy, own = Proxy(notebook), own_notebook.access.client_id
    student = login("student")
    form = _authorization_form(proxy)
    twice = student.post("/o/authorize/", {**form, "client_id": [own, proxy.client_id]})
    assert twice.status_code == 400 and _no_code(twice)
    query = urlencode({**{k: v for k, v in form.items() if k != "allow"}}) + f"&client_id={own}"
    twice = student.get(f"/o/authorize/?{query}")
    assert twice.status_code == 400 and _no_code(twice)
    # the same client in the query and the body: no ambiguity, the rule decides
    same = login("researcher").post(f"/o/authorize/?client_id={proxy.client_id}", form)
    assert proxy.code_from(same)


@pytest.fixture
def unchecked_view(monkeypatch):
    """The authorization view without its own check: what reaches the library alone."""
    from workloads.oidc import WorkloadAuthorizationView

    monkeypatch.setattr(WorkloadAuthorizationView, "_refusal", lambda self, request: None)


@pytest.mark.parametrize("method", ["GET", "POST"])
def test_the_library_saves_no_code_for_a_user_the_rule_refuses(login, notebook, unchecked_view,
                                                               method, caplog):
    proxy = Proxy(notebook)
    student = login("student")
    if method == "GET":
        response = proxy.authorize(student)
    else:
        response = student.post("/o/authorize/?client_id=x", _authorization_form(proxy))
    assert response.status_code == 302
    assert "error=access_denied" in response["Location"] and _no_code(response)
    assert "authorization code refused" in caplog.text
    assert not ProxySession.objects.filter(workload=notebook).exists()
    # a stopped workload: not even its owner gets a code
    Workload.objects.filter(pk=notebook.pk).update(state=Workload.State.STOPPED)
    stopped = proxy.authorize(login("researcher"))
    assert "error=access_denied" in stopped["Location"] and _no_code(stopped)


def test_a_code_is_refused_at_redemption_once_its_user_may_not_open_the_workload(login,
                                                                                  notebook):
    proxy = Proxy(notebook)
    code = proxy.code_from(proxy.authorize(login("researcher")))
    Workload.objects.filter(pk=notebook.pk).update(state=Workload.State.STOPPED)
    refused = Client().post("/o/token/", {
        "grant_type": "authorization_code", "code": code, "redirect_uri": proxy.callback,
        "client_id": proxy.client_id, "client_secret": proxy.secret,
        "code_verifier": proxy.verifier})
    assert refused.status_code == 400 and refused.json()["error"] == "invalid_grant"
    session = ProxySession.objects.get(workload=notebook)
    assert session.ended_reason == "The workload is not running any more."


def test_a_code_without_its_proxy_session_is_refused_at_redemption(login, notebook):
    proxy = Proxy(notebook)
    code = proxy.code_from(proxy.authorize(login("researcher")))
    ProxySession.objects.filter(workload=notebook).delete()
    refused = Client().post("/o/token/", {
        "grant_type": "authorization_code", "code": code, "redirect_uri": proxy.callback,
        "client_id": proxy.client_id, "client_secret": proxy.secret,
        "code_verifier": proxy.verifier})
    assert refused.status_code == 400 and refused.json()["error"] == "invalid_grant"
