"""Who gets in, and what the portal hears: gpu-portal-sshd admits only an OpenSSH user
certificate of the portal's CA for this workload and the user asked for, and only once the
portal's start report allows it; every session's start and end is reported, and a periodic
check ends sessions whose access ended. No key, certificate or token in any log."""

from __future__ import annotations

import base64
import time

import pytest
from cryptography.hazmat.primitives.asymmetric import ed25519

from tests.sshd.harness import REPORT_TOKEN, UserKey, free_port, openssh_private, stop_process
from tests.support.waiting import eventually


def refused(result) -> bool:
    return result.returncode == 255 and b"Permission denied (publickey)" in result.stderr


@pytest.mark.parametrize(("case", "logged"), [
    ("expired", "cert has expired"),
    ("another CA", "signed by a CA this workload does not trust"),
    ("another workload", 'the certificate is for workload "7", not "42"'),
    ("another principal", 'principal "alice" not in the set of valid principals'),
    ("a plain key", "a plain key, not a certificate of the portal"),
])
def test_refused_before_the_portal_is_asked(case, logged, start_sshd, client, alice, ca, portal,
                                           tmp_path):
    certificate = True
    if case == "expired":
        alice.certify(ca, valid_from=time.time() - 3600, valid_until=time.time() - 60)
    elif case == "another CA":
        alice.certify(ed25519.Ed25519PrivateKey.generate())
    elif case == "another workload":
        alice.certify(ca, workload="7")
    elif case == "another principal":
        alice.certify(ca, principal="bob")
    else:
        alice, certificate = UserKey(tmp_path / "id_plain"), False  # no certificate beside it
    sshd = start_sshd()
    result = client(sshd).ssh(alice, "true", certificate=certificate)
    assert refused(result), result
    (record,) = sshd.logged("refused", reason=logged)
    assert record["session"] and record["user"] == "alice"
    assert portal.reports == []


def test_the_portal_refusing_the_start_refuses_the_session(start_sshd, client, alice, portal):
    portal.answers["start"] = lambda body: (200, {"allowed": False, "reason": "not a member"})
    sshd = start_sshd()
    result = client(sshd).ssh(alice, "echo in")
    assert refused(result), result
    assert b"in" not in result.stdout
    assert len(portal.of("start")) == 1
    assert sshd.logged("refused", reason="the portal refused: not a member")
    assert not sshd.logged("session start")
    assert portal.of("end") == []


@pytest.mark.parametrize("status", [401, 403])
def test_a_wrong_report_token_refuses(status, start_sshd, client, alice, portal):
    portal.answers["start"] = lambda body: (status, {"detail": "bad token"})
    sshd = start_sshd()
    assert refused(client(sshd).ssh(alice, "true"))
    assert sshd.logged("refused", reason=f"refused this pod's report token ({status})")


def test_the_portal_down_at_start_admits_on_the_certificate(start_sshd, client, alice):
    sshd = start_sshd(portal_url=f"http://127.0.0.1:{free_port()}")  # nothing listens
    result = client(sshd).ssh(alice, "echo in")
    assert result.returncode == 0, result.stderr
    assert result.stdout == b"in\n"
    assert sshd.logged("admitted on the certificate alone",
                       reason="the portal did not answer the start report")


def test_a_portal_error_at_start_admits_on_the_certificate(start_sshd, client, alice, portal):
    portal.answers["start"] = lambda body: (503, {})
    sshd = start_sshd()
    assert client(sshd).ssh(alice, "echo in").stdout == b"in\n"
    assert sshd.logged("admitted on the certificate alone",
                       reason="the portal answered the start report with 503")


def test_start_and_end_reports(start_sshd, client, alice, ca, portal):
    alice.certify(ca, serial=987654321012, key_id="alice@portal wl-42")
    sshd = start_sshd()
    result = client(sshd, relay_headers={"X-Forwarded-For": "203.0.113.9, 10.1.2.3"}).ssh(
        alice, "echo $GPU_PORTAL_SSH_SESSION")
    session = result.stdout.decode().strip()
    assert portal.of("start") == [{"event": "start", "session": session, "user": "alice",
                                   "serial": 987654321012, "key_id": "alice@portal wl-42",
                                   "from": "203.0.113.9"}]
    eventually(lambda: portal.of("end"))
    assert portal.of("end") == [{"event": "end", "session": session, "reason": "client closed"}]
    assert set(portal.authorizations) == {f"Bearer {REPORT_TOKEN}"}
    (started,) = sshd.logged("session start", session=session)
    assert (started["user"], started["from"], started["key_id"], started["serial"]) == (
        "alice", "203.0.113.9", "alice@portal wl-42", "987654321012")
    eventually(lambda: sshd.logged("session end", session=session))
    (ended,) = sshd.logged("session end", session=session)
    assert ended["user"] == "alice" and ended["duration"] and ended["reason"] == "client closed"


def test_without_forwarded_for_the_peer_address_is_reported(start_sshd, client, alice, portal):
    client(start_sshd()).ssh(alice, "true")
    assert portal.of("start")[0]["from"].startswith("127.0.0.1:")


def test_a_check_ending_access_closes_the_session(start_sshd, client, alice, portal):
    sshd = start_sshd(check_interval="300ms")
    checked: list[list[str]] = []

    def check(body):
        checked.append(body["sessions"])
        return 200, {"end": {s: "removed from the project" for s in body["sessions"]}}

    session = client(sshd).popen(alice, "echo started; sleep 60")
    try:
        assert session.stdout.readline() == b"started\n"
        (start,) = portal.of("start")
        portal.answers["check"] = check
        eventually(lambda: session.poll() is not None)
        stderr = session.stderr.read().decode()
    finally:
        stop_process(session)
    assert "gpu-portal: your access to this workload ended: removed from the project" in stderr
    assert [start["session"]] in checked
    eventually(lambda: portal.of("end"))
    assert portal.of("end") == [{"event": "end", "session": start["session"],
                                 "reason": "access ended: removed from the project"}]


def test_a_check_the_portal_does_not_answer_keeps_the_session(start_sshd, client, alice, portal):
    sshd = start_sshd(check_interval="200ms")
    portal.answers["check"] = lambda body: (502, {})
    session = client(sshd).popen(alice, "echo started; sleep 60")
    try:
        assert session.stdout.readline() == b"started\n"
        eventually(lambda: len(portal.of("check")) >= 2)
        assert session.poll() is None
        assert sshd.logged("the session check did not reach the portal: sessions kept")
    finally:
        stop_process(session)


def test_no_key_certificate_or_token_in_any_log(start_sshd, client, alice, ca, host_key,
                                                  portal, tmp_path):
    sshd = start_sshd()
    c = client(sshd, relay_headers={"Authorization": "Bearer relay-token-abc123"})
    admitted = c.ssh(alice, "true")
    stranger = UserKey(tmp_path / "id_stranger")
    stranger.certify(ed25519.Ed25519PrivateKey.generate())
    refused_result = c.ssh(stranger, "true")
    plain = c.ssh(UserKey(tmp_path / "id_plain"), "true", certificate=False)
    assert admitted.returncode == 0 and refused(refused_result) and refused(plain)

    secrets = [REPORT_TOKEN, "relay-token-abc123"]
    for key in (alice, stranger):
        secrets.append(key.cert_path.read_text().split()[1][:40])  # the certificate's blob
        secrets.append(key.path.read_text().splitlines()[1])  # the private key's first line
        secrets.append(base64.b64encode(key.key.public_key().public_bytes_raw()).decode()[:20])
    for key in (ca, host_key):
        secrets.append(openssh_private(key).decode().splitlines()[1])
    logs = {"sshd": sshd.log()}
    for name, result in (("admitted", admitted), ("refused", refused_result), ("plain", plain)):
        logs[name] = result.stderr.decode(errors="replace")
    assert sshd.logged("refused") and sshd.logged("session start")
    for name, text in logs.items():
        for secret in secrets:
            assert secret not in text, f"a secret in the {name} log"
