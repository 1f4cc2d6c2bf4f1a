"""gpuctl's SSH side, against the live portal and real Keystone: the key made once and
kept private, the certificate renewed only when it runs short, the Host block written into a
config file (replacing the workload's earlier one, keeping the rest), and the errors a script
can tell apart. The whole path through the proxy and the server: tests/access/test_ssh_end_to_end.py."""

from __future__ import annotations

import datetime as dt
import subprocess

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import ssh as ssh_format
from django.contrib.auth import get_user_model

from gpuctl import config as config_mod
from gpuctl import ssh as ssh_mod
from gpuctl.client import PortalClient
from tests.support.gpuctl import openrc, run
from tests.workloads.api_calls import vision_lab_ready
from workloads.models import Workload

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def workload_env(live_server, keystone, login, gpu_types, cluster, tmp_path, eager_celery):
    vision_lab_ready(login)
    env = {**openrc(keystone, live_server), "GPUCTL_SSH_DIR": str(tmp_path / "keys"),
           "HOME": str(tmp_path)}
    code, out, err = run(["launch", "--template", "jupyter", "--gpu-type", "a100", "-o",
                          "json"], env)
    assert code == 0, err
    workload = Workload.objects.get()
    Workload.objects.filter(pk=workload.pk).update(state="running", address="192.168.1.30")
    return env, workload


def test_ssh_config_makes_the_key_once_and_reuses_a_certificate_while_it_lasts(workload_env,
                                                                             tmp_path):
    env, workload = workload_env
    code, block, err = run(["ssh-config", str(workload.pk)], env)
    assert code == 0, err
    keys = tmp_path / "keys"
    assert f"Host gpu-portal-{workload.pk}\n" in block
    assert f"IdentityFile {keys}/id_ed25519" in block  # this machine's folder, not ~/.config
    assert f"ssh-proxy {workload.pk}" in block
    private = keys / "id_ed25519"
    assert private.stat().st_mode & 0o777 == 0o600
    key_before = private.read_bytes()
    cert_path = keys / f"workload-{workload.pk}-cert.pub"
    first = cert_path.read_text()
    known = (keys / "known_hosts").read_text()
    assert known.startswith(f"gpu-portal-workload-{workload.pk} ssh-ed25519 ")
    # a second call within the certificate's life asks the portal for nothing
    assert run(["ssh-config", str(workload.pk)], env)[0] == 0
    assert cert_path.read_text() == first and private.read_bytes() == key_before
    assert len(workload.ssh_certificates.all()) == 1


def test_a_certificate_close_to_its_end_is_renewed_for_the_same_key(workload_env, tmp_path):
    env, workload = workload_env
    assert run(["ssh-config", str(workload.pk)], env)[0] == 0
    keys = tmp_path / "keys"
    cert_path = keys / f"workload-{workload.pk}-cert.pub"
    first = cert_path.read_text()
    until = ssh_mod.certificate_valid_until(cert_path)
    api = PortalClient(config_mod.load(env=env, cloud=None, portal_url=None))
    try:
        assert ssh_mod.ensure_certificate(api, workload.pk, keys,
                                          now=until - dt.timedelta(minutes=5)) is None
        assert workload.ssh_certificates.count() == 1
        renewed = ssh_mod.ensure_certificate(api, workload.pk, keys,
                                             now=until - dt.timedelta(seconds=30))
    finally:
        api.close()
    assert renewed is not None and workload.ssh_certificates.count() == 2
    assert cert_path.read_text() != first
    old = ssh_format.load_ssh_public_identity(first.encode())
    new = ssh_format.load_ssh_public_identity(cert_path.read_bytes())
    assert new.public_key().public_bytes(*RAW) == old.public_key().public_bytes(*RAW)


RAW = (serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)


def test_write_replaces_the_workloads_block_and_keeps_the_rest(workload_env, tmp_path):
    env, workload = workload_env
    config = tmp_path / "ssh" / "config"
    config.parent.mkdir()
    config.write_text("Host elsewhere\n    User me\n")
    for _ in range(2):
        code, out, err = run(["ssh-config", str(workload.pk), "--write", str(config)], env)
        assert code == 0 and out == "" and f"gpu-portal-{workload.pk}" in err
    text = config.read_text()
    assert text.startswith("Host elsewhere\n    User me\n")
    assert text.count(f"Host gpu-portal-{workload.pk}\n") == 1
    assert text.count(f"# gpu-portal workload {workload.pk}\n") == 1


def test_write_puts_a_block_openssh_reads_as_meant_whatever_the_folder(workload_env,
                                                                       tmp_path):
    env, workload = workload_env
    keys = tmp_path / 'k "q" #h %h =e'
    config = tmp_path / "ssh_config"
    code, _, err = run(["ssh-config", str(workload.pk), "--write", str(config)],
                       {**env, "GPUCTL_SSH_DIR": str(keys)})
    assert code == 0, err
    read = subprocess.run(["ssh", "-G", "-F", str(config), f"gpu-portal-{workload.pk}"],
                          capture_output=True, text=True, check=True).stdout.splitlines()
    shown = str(keys).replace("%", "%%")  # OpenSSH makes `%%` a `%` when it uses it
    assert f"identityfile {shown}/id_ed25519" in read
    assert f"certificatefile {shown}/workload-{workload.pk}-cert.pub" in read
    assert f"userknownhostsfile {keys}/known_hosts" in read
    principal = get_user_model().objects.get(name="researcher").username
    assert f"user {principal}" in read
    assert len([line for line in read if line.startswith("proxycommand ")]) == 1
    # a folder OpenSSH cannot be told: nothing written, and said why
    before = config.read_text()
    code, _, err = run(["ssh-config", str(workload.pk), "--write", str(config)],
                       {**env, "GPUCTL_SSH_DIR": str(tmp_path / "line\nbreak")})
    assert code != 0 and "nothing written" in err
    assert config.read_text() == before


def test_refusals_exit_with_their_codes(workload_env, keystone, live_server, tmp_path):
    env, workload = workload_env
    other = {**openrc(keystone, live_server, "student", "nlp-lab"),
             "GPUCTL_SSH_DIR": str(tmp_path / "other")}
    code, _, err = run(["ssh-config", str(workload.pk)], other)
    assert code == 6 and "not found" in err.lower()  # another project's: not found
    Workload.objects.filter(pk=workload.pk).update(state="stopped")
    code, _, err = run(["ssh-config", str(workload.pk)], env)
    assert code == 1 and "not running" in err


@pytest.mark.parametrize(("url", "expected"), [
    ("http://192.168.1.5:8888/lab", "ws://192.168.1.5:8888/.gpu-portal/ssh"),
    ("https://w-12.gpu.example.org/", "wss://w-12.gpu.example.org/.gpu-portal/ssh"),
])
def test_the_websocket_address_is_the_workloads_own(url, expected):
    assert ssh_mod.websocket_url(url) == expected


def test_a_workload_without_an_address_is_said_so():
    with pytest.raises(ValueError, match="no address yet"):
        ssh_mod.websocket_url("")
