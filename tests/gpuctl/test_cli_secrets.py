"""gpuctl secrets and gpuctl launch --secret against a live portal and the real Keystone: values
come from a file or stdin, never from an argument, and no output shows one."""

from __future__ import annotations

import io
import json

import pytest

from credentials.models import Secret
from gpuctl import cli
from tests.support.gpuctl import live, run
from tests.support.registry import TEAM_USER, push_image
from tests.support.secrets import VALUE
from workloads.models import Workload


@pytest.mark.parametrize("argv", [["secrets", "--help"], ["secrets", "create", "--help"],
                                  ["secrets", "set", "--help"]])
def test_the_help_says_values_never_come_from_an_argument(argv, capsys):
    assert cli.main(argv) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "never from an argument" in out and "ps" in out


@live
def test_create_list_launch_replace_and_remove(portal, tmp_path, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO(f"# Hugging Face\nHF_TOKEN={VALUE}\n"))
    code, out, err = run(["secrets", "create", "hf", "--kind", "env"], portal)
    assert code == 0, err
    assert "HF_TOKEN" in out and VALUE not in out + err
    secret = Secret.objects.get(name="hf")
    certs = tmp_path / "ca.pem"
    certs.write_text(VALUE)
    code, _, err = run(["secrets", "create", "certs", "--kind", "file", "--from-file",
                        str(certs)], portal)
    assert code == 0, err
    code, out, err = run(["--json", "secrets", "ls"], portal)
    assert code == 0, err
    assert sorted((row["name"], tuple(row["keys"])) for row in json.loads(out)) == [
        ("certs", ("ca.pem",)), ("hf", ("HF_TOKEN",))]
    code, out, err = run(["launch", "--template", "jupyter", "--gpu-type", "a100",
                          "--secret", "hf", "--secret", "certs:/data/certs"], portal)
    assert code == 0, err
    assert "hf (env), certs (file at /data/certs)" in out and VALUE not in out
    workload = Workload.objects.get()
    assert [use["name"] for use in workload.launch_spec["secrets"]] == ["hf", "certs"]
    replacement = tmp_path / "hf.env"
    replacement.write_text("HF_TOKEN=new\nWANDB_API_KEY=other\n")
    code, out, err = run(["secrets", "set", "hf", "--from-file", str(replacement)], portal)
    assert code == 0, err
    secret.refresh_from_db()
    assert secret.keys == ["HF_TOKEN", "WANDB_API_KEY"]
    code, out, err = run(["secrets", "rm", "hf"], portal)
    assert code == 0 and "deleted" in out, err
    code, _, err = run(["secrets", "rm", "hf"], portal)
    assert code == 6 and "no secret hf" in err


@live
def test_a_refused_value_is_named_never_quoted(portal, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO(f"1BAD={VALUE}\n"))
    code, out, err = run(["secrets", "create", "hf", "--kind", "env"], portal)
    assert code == 1
    # the key is named by its place: a key may be a value pasted where a name goes
    assert "Entry 1 of the data is not a variable's name" in err and VALUE not in out + err
    monkeypatch.setattr("sys.stdin", io.StringIO(VALUE))
    code, out, err = run(["secrets", "create", "certs", "--kind", "file"], portal)
    assert code == 2 and "needs --file-name" in err and VALUE not in out + err


@live
def test_a_registry_login_is_tried_and_launch_check_names_the_images_digest(
        portal, monkeypatch, htpasswd_registry, registries_allowed):
    digest = push_image(htpasswd_registry, "team/app")
    password = htpasswd_registry.passwords[TEAM_USER]
    login = f"server={htpasswd_registry.host}\nusername={TEAM_USER}\npassword="
    monkeypatch.setattr("sys.stdin", io.StringIO(f"{login}not-{password}\n"))
    code, _, err = run(["secrets", "create", "team", "--kind", "registry"], portal)
    assert code == 1 and "(400 registry_login_failed)" in err, err
    assert password not in err and not Secret.objects.exists()
    monkeypatch.setattr("sys.stdin", io.StringIO(f"{login}{password}\n"))
    code, _, err = run(["secrets", "create", "team", "--kind", "registry"], portal)
    assert code == 0, err
    image = f"{htpasswd_registry.host}/team/app:v1"
    code, out, err = run(["launch", "--template", "custom", "--kind", "batch", "--image", image,
                          "--gpu-type", "a100", "--secret", "team", "--check"], portal)
    assert code == 0, err
    assert f"info: {image} resolves to {digest[:19]}… with the login of the secret team." in out
    assert password not in out and not Workload.objects.exists()
