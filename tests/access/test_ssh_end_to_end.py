"""SSH into a workload with nothing stood in: the real OpenSSH client (Debian's
openssh-client) run by the real gpuctl, its ProxyCommand `gpuctl ssh-proxy` opening a WebSocket
through the real oauth2-proxy (the pod's configuration, access/proxy.py) to the real
gpu-portal-sshd (sshd/), run on loopback exactly as the pod runs it: the same flags, the same
files from the workload's Secret, wrapping the workload's program. The portal is the live one
(live_server) with its real Keystone: it signs the certificates, issues the bearer tokens, and
decides at each session's start and each check.

A member gets a shell and runs a command; scp copies a file both ways; ssh -L forwards a local
port to the application inside the workload; refused: another project's member, a reader where
the rule says members, an expired certificate, a certificate of another CA, a user removed from
the project (at the next check, and at the next connection); no private key, certificate or
token in any log; the sessions are audited with where they came from and how long they took."""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import NamedTuple
from urllib.parse import urlparse

import pytest
import requests
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
from cryptography.hazmat.primitives.serialization import ssh as ssh_format
from django.contrib.auth import get_user_model
from django.test import TestCase

from access import ssh as portal_ssh
from access.services import service_access_update
from access.ssh_server import SECRET_FILES, SSH_PATH
from audit.models import AuditRecord
from identity import assignments
from stack.authproxy import AuthProxy
from stack.k8s.build import ensure
from stack.procs import free_port
from tests.access.proxies import Relay
from tests.support.gpuctl import openrc
from tests.support.waiting import eventually
from tests.workloads.api_calls import vision_lab_ready
from workloads.manifests import make_pod_template
from workloads.models import SSHSession, Workload
from workloads.objects import workload_spec

pytestmark = [pytest.mark.django_db(transaction=True, serialized_rollback=True),
              pytest.mark.timeout(300)]

CHECK_SECONDS = 1  # the server's check interval here (30 in a pod)
CONTENT = "weights of an epoch\n" * 100


class SSHWorkload(NamedTuple):
    workload: Workload
    proxy: AuthProxy
    server: subprocess.Popen
    server_log: Path
    app_port: int
    app_dir: Path
    secrets: dict[str, str]


@pytest.fixture
def no_role_cache(monkeypatch):
    monkeypatch.setattr(assignments, "ASSIGNMENT_CACHE_SECONDS", 0.001)


@pytest.fixture
def ssh_workload(login, gpu_types, cluster, project_token, issuer, live_server, tmp_path):
    """researcher's Jupyter in vision-lab, launched through the API with SSH (its template's
    default), run as its pod would be: the server wrapping the program (here a web server on
    the pod's loopback, the application), the proxy in front with the route to the server."""
    vision_lab_ready(login)
    with TestCase.captureOnCommitCallbacks(execute=False):
        response = requests.post(f"{live_server.url}/api/v1/workloads/", json={
            "name": "nb", "template": "jupyter", "gpu_type": "a100", "gpu_count": 1},
            headers={"X-Auth-Token": project_token("researcher", "vision-lab")}, timeout=30)
    assert response.status_code == 201, response.text
    workload = Workload.objects.get(pk=response.json()["id"])
    assert workload.ssh
    spec = workload_spec(workload)
    secrets = dict(spec.secret_data)
    config_dir = tmp_path / "ssh-config"
    config_dir.mkdir()
    for key, name in SECRET_FILES.items():
        (config_dir / name).write_text(secrets[key])
    app_dir = tmp_path / "app"
    app_dir.mkdir()
    (app_dir / "index.txt").write_text("the application inside the workload\n")
    app_port, ssh_port = free_port(), free_port()
    # the pod's command line, with what a local run must change: where the binary, its files
    # and the portal are, its port, the check interval, and the program it wraps
    pod_argv = make_pod_template(spec)["spec"]["containers"][0]["command"]
    local = {"--listen": f"127.0.0.1:{ssh_port}", "--config-dir": str(config_dir),
             "--portal": live_server.url, "--check-interval": f"{CHECK_SECONDS}s"}
    split = pod_argv.index("--")
    argv = [str(ensure("portal-sshd", quiet=True)["gpu-portal-sshd"]), pod_argv[1]]
    for flag in pod_argv[2:split]:
        name, _, value = flag.partition("=")
        argv.append(f"{name}={local.pop(name, value)}")
    assert not local, f"the pod's command has no {sorted(local)}"
    assert f"--workload={workload.pk}" in argv
    argv += ["--", sys.executable, "-m", "http.server", str(app_port), "--bind", "127.0.0.1"]
    server_log = tmp_path / "sshd.log"
    server = subprocess.Popen(argv, cwd=app_dir, stdout=server_log.open("wb"),
                              stderr=subprocess.STDOUT, env={**os.environ, "HOME": str(app_dir)})
    relay = Relay(urlparse(live_server.url).port)
    proxy_spec = dataclasses.replace(spec.proxy, upstream_port=app_port, ssh_port=ssh_port,
                                     backend_url=f"http://127.0.0.1:{relay.port}/o")
    proxy = AuthProxy(proxy_spec, secrets={**secrets, "JUPYTER_TOKEN": workload.access_token},
                      workdir=tmp_path / "proxy")
    try:  # whatever fails from here on, the server, its program and the proxy are stopped
        proxy.start()
        Workload.objects.filter(pk=workload.pk).update(address="127.0.0.1", state="running",
                                                       port=proxy.spec.listen_port)
        workload.refresh_from_db()
        eventually(lambda: _get(f"http://127.0.0.1:{app_port}/index.txt"),
                   timeout=30, message="the application did not start under the wrapper")
        yield SSHWorkload(workload, proxy, server, server_log, app_port, app_dir, secrets)
    finally:
        server.send_signal(signal.SIGTERM)  # the wrapper ends its program with it
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
        proxy.stop()
        relay.close()


def gpuctl_env(keystone, live_server, home: Path, user: str = "researcher",
               project: str = "vision-lab") -> dict[str, str]:
    return {**openrc(keystone, live_server, user, project),
            "PATH": os.environ["PATH"], "HOME": str(home),
            "GPUCTL_SSH_DIR": str(home / "gpuctl-ssh")}


def gpuctl(env: dict[str, str], *argv: str, timeout: float = 60,
           stdin: bytes = b"") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpuctl", *argv], env=env, input=stdin,
                          capture_output=True, timeout=timeout)


def test_a_member_runs_a_command_and_gets_a_shell(ssh_workload, keystone, live_server,
                                                  tmp_path):
    env = gpuctl_env(keystone, live_server, tmp_path)
    done = gpuctl(env, "ssh", str(ssh_workload.workload.pk), "--", "echo hello from $USER; pwd")
    assert done.returncode == 0, done.stderr.decode()
    # the login is the principal, made from the Keystone user id (never the name)
    principal = get_user_model().objects.get(name="researcher").username
    assert done.stdout.decode().splitlines() == [f"hello from {principal}",
                                                 str(ssh_workload.app_dir)]
    # a shell: commands on its stdin, and an exit status that comes back
    shell = gpuctl(env, "ssh", str(ssh_workload.workload.pk), stdin=b"echo in a shell\nexit 3\n")
    assert shell.returncode == 3 and b"in a shell" in shell.stdout, shell.stderr.decode()
    # the key stays on this machine; the certificate names the user and this workload only
    key_dir = tmp_path / "gpuctl-ssh"
    assert (key_dir / "id_ed25519").stat().st_mode & 0o077 == 0
    cert = ssh_format.load_ssh_public_identity(
        (key_dir / f"workload-{ssh_workload.workload.pk}-cert.pub").read_bytes())
    assert cert.valid_principals == [principal.encode()]
    assert cert.critical_options == {b"workload@gpu-portal":
                                     str(ssh_workload.workload.pk).encode()}


def test_scp_both_ways_and_ssh_l_through_the_host_block(ssh_workload, keystone, live_server,
                                                        tmp_path):
    env = gpuctl_env(keystone, live_server, tmp_path)
    config = tmp_path / "ssh_config"
    done = gpuctl(env, "ssh-config", str(ssh_workload.workload.pk), "--write", str(config))
    assert done.returncode == 0, done.stderr.decode()
    alias = f"gpu-portal-{ssh_workload.workload.pk}"
    assert f"Host {alias}" in config.read_text()
    local = tmp_path / "up.txt"
    local.write_text(CONTENT)
    # plain OpenSSH from here on, as VS Code Remote-SSH runs it: the ProxyCommand is gpuctl's
    scp = ["scp", "-F", str(config), "-q"]
    up = subprocess.run([*scp, str(local), f"{alias}:uploaded.txt"], env=env,
                        capture_output=True, timeout=60)
    assert up.returncode == 0, up.stderr.decode()
    assert (ssh_workload.app_dir / "uploaded.txt").read_text() == CONTENT
    back = tmp_path / "down.txt"
    down = subprocess.run([*scp, f"{alias}:index.txt", str(back)], env=env,
                          capture_output=True, timeout=60)
    assert down.returncode == 0, down.stderr.decode()
    assert back.read_text() == "the application inside the workload\n"
    # a local port forwarded to the application on the workload's loopback
    port = free_port()
    tunnel = subprocess.Popen(["ssh", "-F", str(config), "-N", "-L",
                               f"127.0.0.1:{port}:127.0.0.1:{ssh_workload.app_port}", alias],
                              env=env, stderr=subprocess.PIPE)
    try:
        page = eventually(lambda: _get(f"http://127.0.0.1:{port}/index.txt"), timeout=30,
                          message="the forwarded port did not answer")
        assert page == "the application inside the workload\n"
    finally:
        tunnel.terminate()
        tunnel.wait(timeout=10)


def _get(url: str) -> str | None:
    try:
        response = requests.get(url, timeout=5)
    except requests.ConnectionError:
        return None
    return response.text if response.ok else None


def test_another_projects_member_and_a_refused_reader_get_no_certificate(
        ssh_workload, keystone, live_server, tmp_path):
    workload_id = str(ssh_workload.workload.pk)
    other = gpuctl(gpuctl_env(keystone, live_server, tmp_path / "o", "student", "nlp-lab"),
                   "ssh", workload_id, "--", "true")
    assert other.returncode == 6, other.stderr.decode()  # not found: not theirs to see
    service_access_update(tenant=ssh_workload.workload.tenant, actor=None, who="members")
    reader = gpuctl(gpuctl_env(keystone, live_server, tmp_path / "r", "viewer"),
                    "ssh", workload_id, "--", "true")
    assert reader.returncode == 1 and b"reader" in reader.stderr, reader.stderr.decode()
    assert not (tmp_path / "r" / "gpuctl-ssh" / f"workload-{workload_id}-cert.pub").exists()


def _own_certificate(tmp_path: Path, ca_key, workload: Workload, *, principal: str,
                     valid_after: dt.datetime, valid_before: dt.datetime) -> Path:
    """A key and a certificate for it signed by `ca_key`, and an OpenSSH config that offers it
    through gpuctl's ProxyCommand (so only the certificate differs from a real one)."""
    key = ed25519.Ed25519PrivateKey.generate()
    folder = tmp_path / uuid.uuid4().hex[:6]
    folder.mkdir()
    (folder / "key").write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption()))
    (folder / "key").chmod(0o600)
    cert = (ssh_format.SSHCertificateBuilder().public_key(key.public_key())
            .serial(12345).type(ssh_format.SSHCertificateType.USER).key_id(b"forged")
            .valid_principals([principal.encode()])
            .valid_after(int(valid_after.timestamp())).valid_before(int(valid_before.timestamp()))
            .add_critical_option(b"workload@gpu-portal", str(workload.pk).encode())
            .add_extension(b"permit-pty", b"").sign(ca_key))
    (folder / "key-cert.pub").write_bytes(cert.public_bytes() + b"\n")
    return folder


def _ssh_with(folder: Path, env: dict[str, str], workload: Workload, tmp_path: Path,
              principal: str) -> subprocess.CompletedProcess:
    """OpenSSH offering only `folder`'s key and certificate, through gpuctl's ProxyCommand."""
    done = gpuctl(env, "ssh-config", str(workload.pk))
    assert done.returncode == 0, done.stderr.decode()
    # the Host block with only this key and certificate in it
    block = re.sub(r"(?m)^(\s*)IdentityFile .*$", rf"\1IdentityFile {folder / 'key'}",
                   done.stdout.decode())
    block = re.sub(r"(?m)^(\s*)CertificateFile .*$",
                   rf"\1CertificateFile {folder / 'key-cert.pub'}", block)
    block = re.sub(r"(?m)^(\s*)User .*$", rf"\1User {principal}", block)
    config = folder / "config"
    config.write_text(block)
    return subprocess.run(["ssh", "-F", str(config), "-o", "BatchMode=yes",
                           f"gpu-portal-{workload.pk}", "true"],
                          env=env, capture_output=True, timeout=60)


def test_an_expired_certificate_and_another_cas_are_refused(ssh_workload, keystone,
                                                             live_server, tmp_path):
    workload = ssh_workload.workload
    env = gpuctl_env(keystone, live_server, tmp_path)
    now = dt.datetime.now(dt.UTC)
    portal_ca = portal_ssh.ca_private_key()
    researcher = get_user_model().objects.get(name="researcher").username  # the principal
    expired = _own_certificate(tmp_path, portal_ca, workload, principal=researcher,
                               valid_after=now - dt.timedelta(hours=1),
                               valid_before=now - dt.timedelta(minutes=5))
    done = _ssh_with(expired, env, workload, tmp_path, researcher)
    assert done.returncode == 255 and b"Permission denied" in done.stderr, done.stderr.decode()
    other_ca = _own_certificate(tmp_path, ed25519.Ed25519PrivateKey.generate(), workload,
                                principal=researcher, valid_after=now - dt.timedelta(minutes=1),
                                valid_before=now + dt.timedelta(minutes=10))
    done = _ssh_with(other_ca, env, workload, tmp_path, researcher)
    assert done.returncode == 255 and b"Permission denied" in done.stderr, done.stderr.decode()
    # a certificate the portal's CA signed but never issued (no serial of its own) is refused
    # by the portal at the session's start
    unissued = _own_certificate(tmp_path, portal_ca, workload, principal=researcher,
                                valid_after=now - dt.timedelta(minutes=1),
                                valid_before=now + dt.timedelta(minutes=10))
    done = _ssh_with(unissued, env, workload, tmp_path, researcher)
    assert done.returncode == 255 and b"Permission denied" in done.stderr, done.stderr.decode()
    assert not SSHSession.objects.filter(workload=workload, ended_at__isnull=True).exists()


def test_a_removed_user_is_cut_off_at_the_next_check_and_refused_after(
        ssh_workload, keystone, live_server, tmp_path, no_role_cache, temporary_member):
    workload = ssh_workload.workload
    user = temporary_member(workload.tenant.keystone_project_id)
    env = gpuctl_env(keystone, live_server, tmp_path, user.name)
    session = subprocess.Popen([sys.executable, "-m", "gpuctl", "ssh", str(workload.pk),
                                "--", "echo started; sleep 120"], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        eventually(lambda: SSHSession.objects.filter(workload=workload, user__name=user.name,
                                                     ended_at__isnull=True).exists(),
                   timeout=60, message="the session never started")
        user.remove()
        removed = time.monotonic()
        session.wait(timeout=60)
    finally:
        session.kill()
    assert time.monotonic() - removed <= CHECK_SECONDS + 10
    assert session.returncode != 0
    ended = SSHSession.objects.get(workload=workload, user__name=user.name)
    assert ended.ended_at is not None and ended.end_reason
    # and a new connection, with the certificate still valid, is refused at its start
    again = subprocess.run(["ssh", "-F", str(tmp_path / "gpuctl-ssh" /
                                            f"workload-{workload.pk}.config"),
                            "-o", "BatchMode=yes", f"gpu-portal-{workload.pk}", "true"],
                           env=env, capture_output=True, timeout=60)
    assert again.returncode == 255, again.stderr.decode()


def test_sessions_are_audited_and_no_secret_is_logged(ssh_workload, keystone, live_server,
                                                      tmp_path, caplog):
    env = gpuctl_env(keystone, live_server, tmp_path)
    done = gpuctl(env, "ssh", str(ssh_workload.workload.pk), "--", "true")
    assert done.returncode == 0, done.stderr.decode()
    workload = ssh_workload.workload
    end = eventually(lambda: AuditRecord.objects.filter(
        action="workload.ssh_session_end").first(), timeout=30,
        message="the session's end was not audited")
    start = AuditRecord.objects.get(action="workload.ssh_session_start")
    assert start.actor_name == end.actor_name == "researcher"
    assert start.after["from"] == "127.0.0.1"  # the client, as the proxy saw it
    assert end.after["duration_seconds"] >= 0 and end.after["session"] == start.after["session"]
    key_dir = tmp_path / "gpuctl-ssh"
    secret_texts = {
        "the client's private key": (key_dir / "id_ed25519").read_text().splitlines()[1],
        "the certificate": (key_dir / f"workload-{workload.pk}-cert.pub").read_text().split()[1],
        "the host key": ssh_workload.secrets["ssh-host-key"].splitlines()[1],
        "the report token": ssh_workload.secrets["ssh-report-token"].strip().split(".")[-1],
    }
    logs = {"the server": ssh_workload.server_log.read_text(),
            "the proxy": ssh_workload.proxy.log_text(),
            "gpuctl": done.stderr.decode() + done.stdout.decode(),
            "the portal": caplog.text}
    for where, text in logs.items():
        for what, secret in secret_texts.items():
            assert secret not in text, f"{what} in {where}'s log"


def test_a_public_workload_keeps_its_login_in_front_of_ssh(ssh_workload, keystone, live_server,
                                                           tmp_path):
    """An admin let the project open the workload to anyone: its pages need no login, its SSH
    path still does (the proxy's route for it keeps the login and takes the bearer token)."""
    workload = ssh_workload.workload
    spec = dataclasses.replace(ssh_workload.proxy.spec, public=True)
    public = AuthProxy(spec, secrets=ssh_workload.proxy.secrets, workdir=tmp_path / "public")
    public.start()
    try:
        assert requests.get(public.url + "/index.txt", timeout=10).text.startswith(
            "the application inside")  # no login for the application
        anonymous = requests.get(public.url + SSH_PATH, timeout=10, allow_redirects=False,
                                 headers={"Connection": "Upgrade", "Upgrade": "websocket",
                                          "Sec-WebSocket-Version": "13",
                                          "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="})
        assert anonymous.status_code in (302, 401, 403), anonymous.status_code
        Workload.objects.filter(pk=workload.pk).update(port=public.spec.listen_port)
        done = gpuctl(gpuctl_env(keystone, live_server, tmp_path), "ssh", str(workload.pk),
                      "--", "echo through the public proxy")
        assert done.returncode == 0, done.stderr.decode()
        assert done.stdout.decode() == "through the public proxy\n"
    finally:
        public.stop()
