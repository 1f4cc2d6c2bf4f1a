"""A portal user is keyed by the Keystone user id; the name is for display. Two users whose
names meet across domains (`victim` of a second domain D, and a user of Default literally named
`victim@D`) both keep working, apart: API calls, budget caps, SSH principals, usage by user.
Real Keystone (a second domain made for the test), PostgreSQL, kubesim."""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
from django.contrib.auth import get_user_model
from django.test import Client
from keystoneauth1 import session as ks_session
from keystoneauth1.identity import v3

from audit.models import AuditRecord
from tests.usage.conftest import T0, make_workload, sample_row
from tests.workloads.api_calls import launch, vision_lab_ready
from usage.services import samples_insert, usage_rollup
from workloads.models import SSHCertificate, Workload

pytestmark = pytest.mark.django_db

PASSWORD = "twin-pass-1234"
JUPYTER = {"template": "jupyter", "gpu_type": "a100", "gpu_count": 1}


@dataclasses.dataclass(frozen=True)
class Twin:
    """A Keystone user made for the test: name, domain name, id."""

    name: str
    domain: str
    id: str


@pytest.fixture
def twins(keystone):
    """`victim` of a new domain D and `victim@D` of Default, both members of vision-lab; and
    `victim` of Default too, a member, whose name meets D's victim's. Removed afterwards."""
    ks = keystone.admin()
    domain = ks.domains.create(name=f"d{uuid.uuid4().hex[:8]}")
    member = next(role for role in ks.roles.list() if role.name == "member")
    made = []
    try:
        for name, domain_id in (("victim", domain.id), (f"victim@{domain.name}", "default"),
                                ("victim", "default")):
            user = ks.users.create(name=name, domain=domain_id, password=PASSWORD, enabled=True)
            made.append(user)
            ks.roles.grant(member, user=user, project=keystone.project_ids["vision-lab"])
        yield {"d": Twin("victim", domain.name, made[0].id),
               "at": Twin(f"victim@{domain.name}", "Default", made[1].id),
               "plain": Twin("victim", "Default", made[2].id)}
    finally:
        for user in made:
            ks.users.delete(user)
        ks.domains.update(domain, enabled=False)
        ks.domains.delete(domain)


@pytest.fixture
def headers(keystone):
    tokens: dict[str, str] = {}

    def _headers(twin: Twin) -> dict[str, str]:
        if twin.id not in tokens:
            auth = v3.Password(auth_url=keystone.url, username=twin.name, password=PASSWORD,
                               user_domain_name=twin.domain, project_name="vision-lab",
                               project_domain_id="default")
            tokens[twin.id] = auth.get_access(ks_session.Session(auth=auth)).auth_token
        return {"HTTP_X_AUTH_TOKEN": tokens[twin.id]}

    return _headers


@pytest.fixture
def vision(login, gpu_types, cluster):
    return vision_lab_ready(login)


def get(path: str, headers: dict, **params):
    return Client().get(f"/api/v1/{path}", params, **headers)


def test_two_users_whose_names_meet_across_domains_both_keep_working(twins, headers, vision):
    d, at = twins["d"], twins["at"]
    for twin in (d, at, d, at):  # the second round is where the name-keyed mirror broke
        response = get("workloads/", headers(twin))
        assert response.status_code == 200, response.content[:500]
    users = get_user_model().objects.filter(keystone_user_id__in=[d.id, at.id])
    shown = {user.username: (user.name, user.label) for user in users}
    assert shown == {d.id: ("victim", f"victim ({d.domain})"),
                     at.id: (at.name, at.name)}

    launched = {}
    for twin in (d, at):
        response = launch(headers(twin), {**JUPYTER, "name": f"nb-{twin.id[:6]}"})
        assert response.status_code == 201, response.json()
        launched[twin.id] = response.json()
    assert {body["owner_id"]: body["owner"] for body in launched.values()} == {
        d.id: f"victim ({d.domain})", at.id: at.name}
    record = AuditRecord.objects.get(action="workload.launch", actor__username=d.id)
    assert record.actor_user_id == d.id and record.actor_name == f"victim ({d.domain})"

    # the owner filter: by id, or by a name only one owner here has
    for owner, expected in ((d.id, d.id), (at.id, at.id), (at.name, at.id),
                            ("victim", d.id), (f"victim ({d.domain})", d.id)):
        rows = get("workloads/", headers(d), owner=owner).json()["results"]
        assert [row["owner_id"] for row in rows] == [expected], owner
    assert get("workloads/", headers(d), owner="nobody").json()["results"] == []


def test_an_owner_name_two_owners_share_is_a_400_naming_both(twins, headers, vision):
    d, plain = twins["d"], twins["plain"]
    for twin in (d, plain):
        assert launch(headers(twin), {**JUPYTER, "name": f"nb-{twin.id[:6]}"}).status_code == 201
    refused = get("workloads/", headers(d), owner="victim")
    assert refused.status_code == 400, refused.content
    body = refused.json()
    assert body["code"] and "owner" in body["fields"]
    message = " ".join(body["fields"]["owner"])
    assert d.id in message and plain.id in message and d.domain in message
    rows = get("workloads/", headers(d), owner=plain.id).json()["results"]
    assert [row["owner_id"] for row in rows] == [plain.id]


def put_budget(headers: dict, tenant_id: int, caps: dict):
    return Client().put(f"/api/v1/tenants/{tenant_id}/budget/",
                        {"period": "month", "gpu_hours": 100, "hard": True, "user_caps": caps},
                        content_type="application/json", **headers)


def test_budget_caps_are_kept_by_user_id_and_only_for_users_of_the_project(
        twins, headers, vision, api_headers, login):
    d, at, plain = twins["d"], twins["at"], twins["plain"]
    for twin in twins.values():
        get("workloads/", headers(twin))  # the portal has seen them
    login("student")  # seen too, but of nlp-lab only
    admin = api_headers("admin", "admin")

    response = put_budget(admin, vision.pk, {d.id: 0, at.name: 3})
    assert response.status_code == 200, response.json()
    assert response.json()["user_caps"] == {d.id: 0.0, at.id: 3.0}

    # a cap of 0 refuses D's victim only: the impostor's name does not reach it
    refused = launch(headers(d), {**JUPYTER, "name": "capped"})
    assert refused.status_code == 403 and refused.json()["code"] == "budget_exhausted"
    assert f"victim ({d.domain})" in refused.json()["detail"]
    assert launch(headers(at), {**JUPYTER, "name": "free"}).status_code == 201
    assert launch(headers(plain), {**JUPYTER, "name": "free2"}).status_code == 201

    for caps, named in (({"victim": 1}, [d.id, plain.id]), ({"ghost": 1}, ["'ghost'"]),
                        ({"student": 1}, ["'student'"]), ({d.id: 1, "victim (" + d.domain + ")": 2},
                                                          ["two caps"])):
        refused = put_budget(admin, vision.pk, caps)
        assert refused.status_code == 400, (caps, refused.json())
        message = " ".join(refused.json()["fields"]["user_caps"])
        assert all(part in message for part in named), (caps, message)
    assert Client().get(f"/api/v1/tenants/{vision.pk}/budget/", **admin).json()["user_caps"] \
        == {d.id: 0.0, at.id: 3.0}  # nothing changed


def public_line() -> str:
    key = ed25519.Ed25519PrivateKey.generate()
    return key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                         serialization.PublicFormat.OpenSSH).decode()


def test_ssh_principals_come_from_the_user_id(twins, headers, vision):
    d, at = twins["d"], twins["at"]
    issued = {}
    for twin in (d, at):
        response = launch(headers(twin), {**JUPYTER, "name": f"nb-{twin.id[:6]}"})
        assert response.status_code == 201, response.json()
        Workload.objects.filter(pk=response.json()["id"]).update(state="running",
                                                                 address="192.168.1.10")
        answer = Client().post(f"/api/v1/workloads/{response.json()['id']}/ssh-certificate/",
                               {"public_key": public_line()}, content_type="application/json",
                               **headers(twin))
        assert answer.status_code == 201, answer.json()
        issued[twin.id] = answer.json()
    for twin in (d, at):
        assert issued[twin.id]["principal"] == twin.id  # Keystone's ids are plain words
        assert f"    User {twin.id}\n" in issued[twin.id]["ssh_config"]
    assert set(SSHCertificate.objects.values_list("principal", flat=True)) == {d.id, at.id}


def test_usage_by_user_keeps_them_apart(twins, headers, vision, settings):
    d, at, plain = twins["d"], twins["at"], twins["plain"]
    settings.PORTAL_USAGE_SCRAPE_INTERVAL = 15.0
    for twin in (d, at, plain):
        get("workloads/", headers(twin))
    users = {user.username: user for user in get_user_model().objects.filter(
        username__in=[d.id, at.id, plain.id])}
    for n, twin in enumerate((d, at, plain)):
        workload = make_workload(vision, users[twin.id], started_at=T0, name=f"w{n}",
                                 finished_at=T0 + dt.timedelta(hours=1))
        samples_insert(rows=[sample_row(T0 + t * dt.timedelta(seconds=15), workload,
                                        uuid=f"GPU-{n}", util=10.0 * (n + 1))
                             for t in range(1, 241)])
    usage_rollup(since=T0, until=T0 + dt.timedelta(hours=2), now=T0 + dt.timedelta(days=1))
    body = get("usage/", headers(d), group_by="user", since="2025-03-03",
               until="2025-03-03").json()
    rows = {row["user_id"]: (row["user"], row["domain"]) for row in body["results"]}
    assert rows == {d.id: (f"victim ({d.domain})", d.domain), at.id: (at.name, "Default"),
                    plain.id: ("victim", "Default")}
