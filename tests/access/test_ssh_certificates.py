"""The portal as an SSH certificate authority: the certificates it signs (read back by
Debian's ssh-keygen), `POST /api/v1/workloads/{id}/ssh-certificate/` under the tenant's rule, and
`POST /api/v1/ssh-sessions/`, where a workload's SSH server reports its sessions. Real Keystone
logins (a role removed in Keystone ends a session at the next check), PostgreSQL, kubesim."""

from __future__ import annotations

import datetime as dt
import subprocess
import uuid

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import dsa, ed25519, rsa
from django.contrib.auth import get_user_model
from django.test import Client
from keystoneauth1 import session as ks_session
from keystoneauth1.identity import v3

from access import ssh as portal_ssh
from access.services import service_access_update
from audit.models import AuditRecord
from identity import assignments
from portal.error_reports import SUBSTITUTE, scrub
from tests.workloads.api_calls import launch, vision_lab_ready
from workloads.access import workload_access
from workloads.models import SSHCertificate, SSHSession, Workload

pytestmark = pytest.mark.django_db

JUPYTER = {"name": "nb", "template": "jupyter", "gpu_type": "a100", "gpu_count": 1}


def public_line(key) -> str:
    return key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                         serialization.PublicFormat.OpenSSH).decode() + " me@laptop"


@pytest.fixture
def vision(login, gpu_types, cluster):
    return vision_lab_ready(login)


@pytest.fixture
def running(vision, api_headers):
    response = launch(api_headers("researcher"), JUPYTER)
    assert response.status_code == 201, response.json()
    Workload.objects.filter(pk=response.json()["id"]).update(state="running",
                                                             address="192.168.1.10")
    return Workload.objects.get(pk=response.json()["id"])


def ask(workload: Workload, headers: dict, public_key: str):
    return Client().post(f"/api/v1/workloads/{workload.pk}/ssh-certificate/",
                         {"public_key": public_key}, content_type="application/json", **headers)


# --- the certificate itself -------------------------------------------------------------------

def test_the_certificate_as_ssh_keygen_reads_it(tmp_path, settings):
    key = ed25519.Ed25519PrivateKey.generate()
    now = dt.datetime(2026, 11, 27, 12, 0, tzinfo=dt.UTC)
    cert = portal_ssh.certificate_for(public_key=key.public_key(), principal="researcher",
                                      workload_id=42, now=now, serial=7, seconds=900)
    path = tmp_path / "id-cert.pub"
    path.write_text(cert.text + "\n")
    shown = subprocess.run(["ssh-keygen", "-L", "-f", str(path)], capture_output=True,
                           text=True, check=True).stdout
    assert "Type: ssh-ed25519-cert-v01@openssh.com user certificate" in shown
    assert "Serial: 7" in shown
    assert "Key ID: \"gpu-portal:researcher:workload-42:7\"" in shown
    assert "Principals: \n                researcher\n" in shown
    # the critical option binding it to the workload (ssh-keygen knows not its name: "42",
    # an SSH string inside the option's data)
    assert "workload@gpu-portal UNKNOWN OPTION: 000000023432 (len 6)" in shown
    assert "permit-port-forwarding" in shown and "permit-pty" in shown
    assert "permit-agent-forwarding" not in shown and "permit-X11-forwarding" not in shown
    assert cert.valid_before - cert.valid_after == dt.timedelta(seconds=960)  # 60 s of skew
    # signed by the CA the workloads trust
    ca_line = portal_ssh.ca_public_key().split()
    assert f"Signing CA: ED25519 {fingerprint_of(ca_line, tmp_path)}" in shown


def fingerprint_of(line: list[str], tmp_path) -> str:
    path = tmp_path / "ca.pub"
    path.write_text(" ".join(line) + "\n")
    out = subprocess.run(["ssh-keygen", "-l", "-f", str(path)], capture_output=True, text=True,
                         check=True).stdout
    return out.split()[1]


def test_the_ca_key_comes_from_secret_key_unless_the_site_sets_one(settings):
    first = portal_ssh.ca_public_key()
    assert first == portal_ssh.ca_public_key()  # stable
    settings.SECRET_KEY = "another-secret-key-" + "x" * 50
    assert portal_ssh.ca_public_key() != first
    own = ed25519.Ed25519PrivateKey.generate()
    settings.PORTAL_SSH_CA_KEY = own.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption()).decode()
    assert portal_ssh.ca_public_key().split()[:2] == public_line(own).split()[:2]


def test_host_keys_and_report_tokens_are_per_workload_and_checked():
    private, public = portal_ssh.host_key_for("workload-1-aa")
    assert private.startswith("-----BEGIN PRIVATE KEY-----")
    assert portal_ssh.host_key_for("workload-1-aa") == (private, public)
    assert portal_ssh.host_key_for("workload-2-bb")[1] != public
    token = portal_ssh.report_token_for("workload-1-aa")
    assert portal_ssh.report_token_client(token) == "workload-1-aa"
    assert portal_ssh.report_token_client(token[:-1] + ("A" if token[-1] != "A" else "B")) is None
    assert portal_ssh.report_token_client("workload-2-bb." + token.split(".")[-1]) is None
    assert portal_ssh.report_token_client("no-dot") is None


# --- the API ------------------------------------------------------------------------------------

def test_a_member_gets_a_certificate_a_host_block_and_the_host_key(running, api_headers):
    key = ed25519.Ed25519PrivateKey.generate()
    response = ask(running, api_headers("researcher"), public_line(key))
    assert response.status_code == 201, response.json()
    body = response.json()
    researcher = get_user_model().objects.get(name="researcher")
    assert body["principal"] == researcher.keystone_user_id  # from the id, never the name
    assert body["certificate"].startswith("ssh-ed25519-cert-v01@openssh.com ")
    alias = f"gpu-portal-workload-{running.pk}"
    assert body["host_alias"] == alias
    _, host_public = portal_ssh.host_key_for(workload_access(running).client_id)
    assert body["known_hosts"] == f"{alias} {' '.join(host_public.split()[:2])}"
    block = body["ssh_config"]
    assert f"Host gpu-portal-{running.pk}\n" in block
    assert f"ProxyCommand gpuctl ssh-proxy {running.pk}\n" in block
    assert f"HostKeyAlias {alias}\n" in block and "StrictHostKeyChecking yes" in block
    issued = SSHCertificate.objects.get(workload=running)
    assert issued.principal == researcher.username and issued.key_fingerprint.startswith("SHA256:")
    record = AuditRecord.objects.get(action="workload.ssh_certificate")
    assert record.actor_name == "researcher" and record.after["serial"] == issued.serial
    assert public_line(key).split()[1] not in str(record.after)  # its fingerprint only


def test_another_projects_member_gets_404_and_a_refused_reader_403(running, api_headers):
    key = public_line(ed25519.Ed25519PrivateKey.generate())
    assert ask(running, api_headers("student", "nlp-lab"), key).status_code == 404
    service_access_update(tenant=running.tenant, actor=None, who="members")
    refused = ask(running, api_headers("viewer"), key)
    assert refused.status_code == 403 and refused.json()["code"] == "access_denied"
    assert "reader" in refused.json()["detail"]
    assert not SSHCertificate.objects.exists()


@pytest.mark.parametrize("change, code", [
    ("tenant-off", "ssh_disabled"), ("stopped", "ssh_unavailable"),
    ("launched-without", "ssh_unavailable")])
def test_no_certificate_where_there_is_no_ssh(running, api_headers, change, code):
    if change == "tenant-off":
        service_access_update(tenant=running.tenant, actor=None, ssh_enabled=False)
    elif change == "stopped":
        Workload.objects.filter(pk=running.pk).update(state="stopped")
    else:
        Workload.objects.filter(pk=running.pk).update(
            launch_spec={**running.launch_spec, "ssh": False})
    response = ask(running, api_headers("researcher"),
                   public_line(ed25519.Ed25519PrivateKey.generate()))
    assert response.status_code == 403 and response.json()["code"] == code, response.json()
    assert not SSHCertificate.objects.exists()


@pytest.mark.parametrize("key", [
    "", "not a key", "ssh-ed25519 AAAA!!!", "ssh-ed25519-cert-v01@openssh.com AAAA x",
    "KEY\nKEY",
], ids=["empty", "words", "bad-base64", "certificate", "two-lines"])
def test_what_is_not_a_public_key_is_a_400_on_the_field(running, api_headers, key):
    if key == "KEY\nKEY":
        line = public_line(ed25519.Ed25519PrivateKey.generate())
        key = f"{line}\n{line}"
    response = ask(running, api_headers("researcher"), key)
    assert response.status_code == 400 and "public_key" in response.json()["fields"]
    assert not SSHCertificate.objects.exists()


def test_weak_keys_are_refused(running, api_headers):
    small = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    response = ask(running, api_headers("researcher"), public_line(small))
    assert response.status_code == 400 and "2048" in response.json()["fields"]["public_key"][0]
    legacy = dsa.generate_private_key(key_size=1024)
    response = ask(running, api_headers("researcher"), public_line(legacy))
    assert response.status_code == 400
    good = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    assert ask(running, api_headers("researcher"), public_line(good)).status_code == 201


# --- the servers' reports --------------------------------------------------------------------

def report(workload: Workload, body: dict, token: str | None = None):
    token = token or portal_ssh.report_token_for(workload_access(workload).client_id)
    return Client().post("/api/v1/ssh-sessions/", body, content_type="application/json",
                         HTTP_AUTHORIZATION=f"Bearer {token}")


def issued(running, api_headers, user: str = "researcher") -> SSHCertificate:
    response = ask(running, api_headers(user), public_line(ed25519.Ed25519PrivateKey.generate()))
    assert response.status_code == 201, response.json()
    return SSHCertificate.objects.filter(workload=running, user__name=user).latest("pk")


def start(workload, cert, session=None, user=None):
    return report(workload, {"event": "start", "session": str(session or uuid.uuid4()),
                             "user": user or cert.principal, "serial": cert.serial,
                             "key_id": cert.key_id, "from": "203.0.113.9"})


def test_a_session_is_admitted_recorded_once_and_its_end_audited(running, api_headers):
    cert = issued(running, api_headers)
    session = uuid.uuid4()
    assert start(running, cert, session).json() == {"allowed": True}
    assert start(running, cert, session).json() == {"allowed": True}  # a retried start
    assert SSHSession.objects.filter(workload=running).count() == 1
    assert AuditRecord.objects.filter(action="workload.ssh_session_start").count() == 1
    recorded = AuditRecord.objects.get(action="workload.ssh_session_start")
    assert recorded.after["from"] == "203.0.113.9" and recorded.actor_name == "researcher"
    checked = report(running, {"event": "check", "sessions": [str(session)]})
    assert checked.json() == {"end": {}}
    for _ in range(2):
        assert report(running, {"event": "end", "session": str(session),
                                "reason": "client closed"}).status_code == 200
    ended = AuditRecord.objects.filter(action="workload.ssh_session_end")
    assert ended.count() == 1 and "duration_seconds" in ended.get().after
    assert SSHSession.objects.get(session=session).end_reason == "client closed"


def test_certificates_the_portal_did_not_issue_for_this_workload_and_user_are_refused(
        running, api_headers, vision):
    cert = issued(running, api_headers)
    other = launch(api_headers("researcher"), {**JUPYTER, "name": "other"})
    other_workload = Workload.objects.get(pk=other.json()["id"])
    Workload.objects.filter(pk=other_workload.pk).update(state="running")
    other_workload.refresh_from_db()
    assert start(other_workload, cert).json()["allowed"] is False  # another workload's serial
    assert start(running, cert, user="lead").json()["allowed"] is False  # another principal
    unknown = report(running, {"event": "start", "session": str(uuid.uuid4()),
                               "user": "researcher", "serial": 12345, "from": "x"})
    assert unknown.json() == {"allowed": False,
                              "reason": "the portal never issued that certificate"}
    SSHCertificate.objects.filter(pk=cert.pk).update(
        valid_before=dt.datetime.now(dt.UTC) - dt.timedelta(seconds=1))
    assert "expired" in start(running, cert).json()["reason"]
    assert not SSHSession.objects.exists()


def test_a_wrong_report_token_is_401_and_records_nothing(running, api_headers):
    cert = issued(running, api_headers)
    body = {"event": "start", "session": str(uuid.uuid4()), "user": "researcher",
            "serial": cert.serial, "from": "x"}
    client_id = workload_access(running).client_id
    for token in (f"{client_id}.forged", "garbage", portal_ssh.report_token_for("workload-9-x")):
        response = report(running, body, token=token)
        assert response.status_code == 401 and response.json()["code"], response.content
    keystone_style = Client().post("/api/v1/ssh-sessions/", body,
                                   content_type="application/json", **api_headers("researcher"))
    assert keystone_style.status_code == 401
    assert not SSHSession.objects.exists()


@pytest.mark.parametrize("body", [
    {"event": "start"}, {"event": "check"}, {"event": "check", "sessions": ["x"]},
    {"event": "nope"}, {"event": "check", "sessions": [str(uuid.uuid4())] * 1001},
])
def test_bad_reports_are_400_json(running, body):
    response = report(running, body)
    assert response.status_code == 400 and response.json()["code"], response.content


def test_a_check_ends_the_sessions_of_a_removed_user_and_when_ssh_is_turned_off(
        running, api_headers, monkeypatch, temporary_member):
    monkeypatch.setattr(assignments, "ASSIGNMENT_CACHE_SECONDS", 0.001)
    user = temporary_member(running.tenant.keystone_project_id)
    temp = issued(running, api_headers, user.name)
    mine = issued(running, api_headers)
    theirs, own = uuid.uuid4(), uuid.uuid4()
    assert start(running, temp, theirs).json()["allowed"] is True
    assert start(running, mine, own).json()["allowed"] is True
    user.remove()
    answer = report(running, {"event": "check", "sessions": [str(theirs), str(own)]}).json()
    assert set(answer["end"]) == {str(theirs)}
    assert "no role" in answer["end"][str(theirs)]
    assert SSHSession.objects.get(session=theirs).ended_at is not None
    # and their next connection is refused at its start
    assert start(running, temp).json()["allowed"] is False
    service_access_update(tenant=running.tenant, actor=None, ssh_enabled=False)
    answer = report(running, {"event": "check", "sessions": [str(own)]}).json()
    assert "turned off" in answer["end"][str(own)]


def test_only_admins_turn_ssh_off(running, api_headers):
    url = f"/api/v1/tenants/{running.tenant_id}/service-access/"
    manager = Client().patch(url, {"ssh_enabled": False}, content_type="application/json",
                             **api_headers("lead"))
    assert manager.status_code == 403
    admin = Client().patch(url, {"ssh_enabled": False}, content_type="application/json",
                           **api_headers("admin", "admin"))
    assert admin.status_code == 200 and admin.json()["ssh_enabled"] is False
    record = AuditRecord.objects.filter(action="tenant.service_access").latest("pk")
    assert record.before["ssh_enabled"] is True and record.after["ssh_enabled"] is False


def test_openssh_reads_the_host_block(tmp_path):
    config = tmp_path / "config"
    config.write_text(portal_ssh.ssh_config_block(workload_id=42, principal="a1b2c3",
                                                  key_dir=str(tmp_path)))
    result = subprocess.run(["ssh", "-G", "-F", str(config), "gpu-portal-42"],
                            capture_output=True, text=True, check=True)
    resolved = dict(line.split(" ", 1) for line in result.stdout.splitlines() if " " in line)
    assert resolved["user"] == "a1b2c3"
    assert resolved["proxycommand"] == "gpuctl ssh-proxy 42"
    assert resolved["hostkeyalias"] == "gpu-portal-workload-42"
    assert resolved["certificatefile"] == f"{tmp_path}/workload-42-cert.pub"
    assert resolved["identityfile"] == f"{tmp_path}/id_ed25519"
    assert resolved["stricthostkeychecking"] == "true"


HOSTILE_NAME = 'x"\n    ProxyCommand touch /tmp/p\n#'


def test_a_user_named_to_inject_gets_a_block_openssh_reads_as_meant(running, keystone,
                                                                     tmp_path):
    ks = keystone.admin()
    member = next(r for r in ks.roles.list() if r.name == "member")
    user = ks.users.create(name=HOSTILE_NAME, domain="default", password="hostile-pass-1")
    try:
        ks.roles.grant(member, user=user, project=running.tenant.keystone_project_id)
        auth = v3.Password(auth_url=keystone.url, username=HOSTILE_NAME,
                           password="hostile-pass-1", user_domain_id="default",
                           project_id=running.tenant.keystone_project_id)
        token = auth.get_access(ks_session.Session(auth=auth)).auth_token
        response = ask(running, {"HTTP_X_AUTH_TOKEN": token},
                       public_line(ed25519.Ed25519PrivateKey.generate()))
    finally:
        ks.users.delete(user)
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["principal"] == user.id
    config = tmp_path / "config"
    config.write_text(body["ssh_config"])
    resolved = subprocess.run(["ssh", "-G", "-F", str(config), f"gpu-portal-{running.pk}"],
                              capture_output=True, text=True, check=True).stdout.splitlines()
    assert f"user {user.id}" in resolved
    assert [line for line in resolved if line.startswith("proxycommand ")] == [
        f"proxycommand gpuctl ssh-proxy {running.pk}"]
    assert "touch" not in body["ssh_config"] and '"' not in body["ssh_config"]


def test_a_reader_gets_no_certificate_even_where_readers_open_the_services(running,
                                                                            api_headers,
                                                                            as_user):
    service_access_update(tenant=running.tenant, actor=None, who="readers")
    refused = ask(running, api_headers("viewer"),
                  public_line(ed25519.Ed25519PrivateKey.generate()))
    assert refused.status_code == 403 and refused.json()["code"] == "access_denied"
    assert "members" in refused.json()["detail"] and "reader" in refused.json()["detail"]
    assert not SSHCertificate.objects.exists()
    # the page lets the reader open the workload, and says SSH is the members'
    page = as_user("viewer").get(f"/workloads/{running.pk}/").content.decode()
    assert 'id="ssh-members-only"' in page and 'id="ssh-command"' not in page
    member_page = as_user("researcher").get(f"/workloads/{running.pk}/").content.decode()
    assert 'id="ssh-command"' in member_page and 'id="ssh-members-only"' not in member_page


def test_the_report_address_defaults_to_the_oidc_backend(settings):
    settings.PORTAL_SSH_REPORT_URL = ""
    settings.PORTAL_OIDC_BACKEND_URL = ""
    settings.PORTAL_OIDC_ISSUER = "https://portal.example.org/o"
    assert portal_ssh.report_base_url() == "https://portal.example.org"
    settings.PORTAL_OIDC_BACKEND_URL = "http://gpu-portal-web.gpu-portal:8000/o"
    assert portal_ssh.report_base_url() == "http://gpu-portal-web.gpu-portal:8000"
    settings.PORTAL_SSH_REPORT_URL = "http://portal-internal:8000/"
    assert portal_ssh.report_base_url() == "http://portal-internal:8000"


def test_certificates_private_keys_and_report_tokens_are_scrubbed_from_logs():
    key = ed25519.Ed25519PrivateKey.generate()
    certificate = portal_ssh.certificate_for(public_key=key.public_key(), principal="me",
                                             workload_id=7, now=dt.datetime.now(dt.UTC)).text
    token = portal_ssh.report_token_for("workload-7-0123456789abcdef")
    private = portal_ssh.host_key_for("workload-7-0123456789abcdef")[0]
    blob = certificate.split()[1]
    for secret in (certificate, blob, token, private):
        cleaned = scrub(f"before {secret} after")
        assert cleaned.startswith("before ") and SUBSTITUTE in cleaned
        assert secret not in cleaned and blob[20:60] not in cleaned
    # a public key is not a secret
    assert scrub(public_line(key)) == public_line(key)
