"""gpuctl against a live portal (pytest-django's live_server) and the real Keystone: the CLI's
own main(argv) in-process, and the installed console script once in a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pytest
import yaml

from gpuctl import cli
from gpuctl.commands.logs import new_lines
from tests.support.gpuctl import live, openrc, run

# --- without a server -------------------------------------------------------------------------

@pytest.mark.parametrize("argv", [["--help"], *[[name, "--help"] for name in (
    "whoami", "gpu-types", "templates", "launch", "list", "show", "logs", "stop", "delete",
    "quota", "usage", "token", "budget")]])
def test_help_everywhere(argv, capsys):
    assert cli.main(argv) == 0
    assert "usage: gpuctl" in capsys.readouterr().out


def test_usage_errors_exit_2():
    assert run(["launch", "--gpu-type", "a100"], {})[0] == 2  # --template missing
    assert run(["show", "not-a-number"], {})[0] == 2
    code, _, err = run(["list"], {"HOME": "/nonexistent"})
    assert code == 2 and "OS_AUTH_URL" in err
    code, _, err = run(["list"], {"OS_AUTH_URL": "http://k/v3", "OS_USERNAME": "u",
                                  "OS_PASSWORD": "p", "HOME": "/nonexistent"})
    assert code == 2 and "OS_PROJECT_NAME" in err
    code, _, err = run(["list"], {"OS_CLOUD": "nowhere", "HOME": "/nonexistent"})
    assert code == 2 and "no cloud named 'nowhere'" in err


def test_new_log_lines_of_a_polled_tail():
    assert new_lines([], ["a", "b"]) == ["a", "b"]
    assert new_lines(["a", "b", "c"], ["b", "c", "d", "e"]) == ["d", "e"]
    assert new_lines(["a", "b"], ["a", "b"]) == []
    assert new_lines(["x"], ["y", "z"]) == ["y", "z"]


# --- against the live portal --------------------------------------------------------------------


@pytest.fixture
def tracker():
    """The lifecycle tracker, running in the background as its process would (under the lease)."""
    from django.db import connection

    from kube.client import Kube
    from workloads.tracking.tracker import Tracker, track

    stop = threading.Event()

    def loop() -> None:
        try:
            track(stop=stop, tracker=Tracker(Kube()))
        finally:
            connection.close()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    yield
    stop.set()
    thread.join(timeout=30)


@live
def test_catalogue_and_identity(portal):
    code, out, _ = run(["gpu-types"], portal)
    assert code == 0
    assert out.splitlines()[0].split()[:3] == ["SLUG", "NAME", "RESOURCE"]
    assert any(line.startswith("a100 ") for line in out.splitlines())
    code, out, _ = run(["-o", "json", "templates"], portal)
    assert code == 0
    assert {t["slug"] for t in json.loads(out)} >= {"jupyter", "digits", "tensorboard", "custom"}
    # what --arg may add to each: the custom template any, TensorBoard its options, others none
    code, out, _ = run(["templates"], portal)
    lines = {line.split()[0]: line.rstrip() for line in out.splitlines()}
    assert lines["SLUG"].endswith("OPTIONS")
    assert lines["tensorboard"].endswith(" --logdir --reload_interval")
    assert lines["custom"].endswith(" any") and lines["jupyter"].endswith(" -")
    code, out, _ = run(["whoami", "-o", "json"], portal)
    me = json.loads(out)
    assert (me["user_name"], me["project"]["name"], me["role"]) == \
        ("researcher", "vision-lab", "member")
    code, out, _ = run(["quota"], portal)
    assert code == 0 and "tenant vision-lab" in out and "gpus a100" in out
    code, out, _ = run(["usage", "-o", "json"], portal)
    assert code == 0 and json.loads(out)["group_by"] == "tenant"


@live
def test_launch_wait_list_show_logs_stop_delete(portal, tracker):
    code, out, err = run(["launch", "--template", "custom", "--kind", "service",
                          "--gpu-type", "v100", "--gpus", "1", "--image", "python:3.12-slim",
                          "--port", "8080", "--name", "from cli",
                          "--command", "python -m http.server 8080", "--env", "A=1",
                          "--cpu", "2", "--memory", "8", "--max-runtime", "60",
                          "--wait", "--timeout", "60", "--interval", "0.3", "-o", "json"],
                         portal)
    assert code == 0, err
    workload = json.loads(out)
    assert workload["state"] == "running"
    assert (workload["template"], workload["gpu_type"], workload["gpu_count"]) == \
        ("custom", "v100", 1)
    assert workload["command"] == ["python", "-m", "http.server", "8080"]
    assert (workload["cpu"], workload["memory"], workload["max_runtime_minutes"]) == (2, 8, 60)
    assert "running" in err  # --wait reports the states it sees
    wid = str(workload["id"])

    code, out, _ = run(["list", "--state", "running"], portal)
    assert code == 0 and any(line.split()[:2] == [wid, "from"] for line in out.splitlines())
    code, out, _ = run(["show", wid, "--events"], portal)
    assert code == 0 and "state" in out and "Submitted" in out
    code, out, _ = run(["logs", wid, "--tail", "20"], portal)
    assert code == 0
    code, out, err = run(["stop", wid, "--wait", "--timeout", "60", "--interval", "0.3"],
                         portal)
    assert code == 0, err
    assert "stopped" in out
    assert run(["delete", wid], portal)[0] == 0
    code, _, err = run(["show", wid], portal)
    assert code == 6 and "404" in err


@live
def test_a_quota_refusal_exits_4_and_names_the_limit(portal):
    base = ["launch", "--template", "jupyter", "--gpu-type", "a100"]
    assert run([*base, "--gpus", "4"], portal)[0] == 0
    code, _, err = run([*base, "--gpus", "1"], portal)
    assert code == 4
    assert "vision-lab uses 4 of 4 a100 GPUs" in err and "quota_exceeded" in err


@live
def test_invalid_input_exits_1_with_the_field_errors(portal):
    code, _, err = run(["launch", "--template", "custom", "--gpu-type", "a100",
                        "--image", "$(id)", "--port", "80"], portal)
    assert code == 1
    assert "image:" in err


@live
def test_wait_gives_up_after_its_timeout_with_exit_5(portal):
    # no tracker runs here, so the workload never leaves its first states
    code, out, err = run(["launch", "--template", "jupyter", "--gpu-type", "a100", "--wait",
                          "--timeout", "1", "--interval", "0.2"], portal)
    assert code == 5
    assert "after 1 s" in err


@live
def test_a_token_for_a_service_s_address(portal):
    """`gpuctl token`: a bearer token whose audience is the workload's proxy client."""
    launched = json.loads(run(["launch", "--template", "jupyter", "--gpu-type", "a100",
                               "-o", "json"], portal)[1])
    code, out, err = run(["token", str(launched["id"]), "--header"], portal)
    assert code == 0, err
    header, token = out.strip().split(": Bearer ")
    assert header == "Authorization" and token.count(".") == 2  # a JWT
    code, out, _ = run(["token", str(launched["id"]), "-o", "json"], portal)
    assert code == 0 and json.loads(out)["expires_in"] <= 60
    batch = json.loads(run(["launch", "--template", "custom", "--kind", "batch", "--image",
                            "busybox:1.36", "--gpu-type", "a100", "-o", "json"], portal)[1])
    code, _, err = run(["token", str(batch["id"])], portal)
    assert code == 1 and "no authenticating proxy" in err


@live
def test_the_same_idempotency_key_gives_the_same_workload(portal):
    key = uuid.uuid4().hex
    argv = ["launch", "--template", "jupyter", "--gpu-type", "a100", "-o", "json",
            "--idempotency-key", key]
    code, out, err = run(argv, portal)
    assert code == 0, err
    first = json.loads(out)
    code, out, err = run(argv, portal)
    assert code == 0, err
    second = json.loads(out)
    assert first["id"] == second["id"]


@live
def test_wrong_password_exits_3(live_server, keystone):
    code, _, err = run(["list"], openrc(keystone, live_server, password="wrong"))
    assert code == 3 and "Keystone refused" in err


@live
def test_another_projects_workload_is_not_found(portal, keystone, live_server):
    launched = json.loads(run(["launch", "--template", "jupyter", "--gpu-type", "a100",
                               "-o", "json"], portal)[1])
    student = openrc(keystone, live_server, user="student", project="nlp-lab")
    assert run(["show", str(launched["id"])], student)[0] == 6
    assert run(["stop", str(launched["id"])], student)[0] == 6


@live
def test_an_application_credential_from_the_environment(portal, keystone, live_server):
    from tests.support.gpuctl import user_client

    ks = user_client(keystone, "researcher", "vision-lab")
    user_id = ks.session.get_user_id()
    credential = ks.application_credentials.create(name=f"gpuctl-{uuid.uuid4().hex[:8]}",
                                                   user=user_id)
    try:
        env = {"OS_AUTH_URL": keystone.url, "OS_AUTH_TYPE": "v3applicationcredential",
               "OS_APPLICATION_CREDENTIAL_ID": credential.id,
               "OS_APPLICATION_CREDENTIAL_SECRET": credential.secret,
               "GPU_PORTAL_URL": live_server.url, "HOME": "/nonexistent"}
        code, out, err = run(["whoami", "-o", "json"], env)
        assert code == 0, err
        assert json.loads(out)["project"]["name"] == "vision-lab"
        assert run(["list"], env)[0] == 0
    finally:
        ks.application_credentials.delete(credential.id, user=user_id)


@live
def test_a_clouds_yaml_entry(portal, keystone, live_server, tmp_path, monkeypatch):
    clouds = {"clouds": {"gpu-demo": {
        "auth": {"auth_url": keystone.url, "username": "viewer", "password": "viewer-demo-pass",
                 "project_name": "vision-lab", "user_domain_name": "Default",
                 "project_domain_name": "Default"},
        "identity_api_version": 3, "gpu_portal_url": live_server.url}}}
    (tmp_path / "clouds.yaml").write_text(yaml.safe_dump(clouds))
    monkeypatch.chdir(tmp_path)  # ./clouds.yaml is the first place looked
    code, out, err = run(["whoami", "-o", "json"], {"OS_CLOUD": "gpu-demo", "HOME": "/nope"})
    assert code == 0, err
    assert json.loads(out)["role"] == "reader"
    # a reader cannot launch: the API's 403, exit 1
    code, _, err = run(["--os-cloud", "gpu-demo", "launch", "--template", "jupyter",
                        "--gpu-type", "a100"], {"HOME": "/nope"})
    assert code == 1 and "403" in err


@live
def test_the_installed_console_script(portal):
    script = Path(sys.executable).with_name("gpuctl")
    assert script.exists(), "pip install -e . installs the gpuctl console script"
    result = subprocess.run([str(script), "-o", "json", "gpu-types"], env=portal,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "a100" in {row["slug"] for row in json.loads(result.stdout)}
