"""A workload's pod with the portal's SSH server: the init container, the wrapped
program, the server's files and the proxy's route, as dicts and against the Kubernetes schema."""

from __future__ import annotations

import dataclasses
import re

import kubernetes_validate
import pytest
import yaml

from access.proxy import CONFIG_KEY, paths_outside, proxy_args, proxy_files
from access.ssh_server import (
    BIN_DIR,
    CONFIG_DIR,
    SECRET_FILES,
    SSH_PATH,
    SSH_PORT,
    SSHServerSpec,
    ssh_port_beside,
)
from tests.support.manifests import (
    CUSTOM_BATCH,
    CUSTOM_SERVICE,
    JUPYTER,
    PROXY_SECRETS,
    proxy_for,
)
from workloads.manifests import make_pod_template, make_secret, workload_objects

SSH_SECRETS = (("ssh-ca.pub", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBcA gpu-portal-ca\n"),
               ("ssh-host-key", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn==\n"
                                "-----END OPENSSH PRIVATE KEY-----\n"),
               ("ssh-report-token", "workload-42-0123456789abcdef.bWFj\n"))


def with_ssh(spec, *, entrypoint=(), port=SSH_PORT, proxy=None):
    server = SSHServerSpec(image="ghcr.io/gpu-portal/gpu-portal-sshd:0.26.0",
                           workload_id=spec.workload_id, portal_url="http://portal.example:8000",
                           secret_name=spec.name, port=port)
    return dataclasses.replace(
        spec, ssh=server, entrypoint=tuple(entrypoint),
        proxy=dataclasses.replace(proxy or spec.proxy, ssh_port=port),
        secret_data=tuple(sorted((*PROXY_SECRETS, *SSH_SECRETS))))


JUPYTER_SSH = with_ssh(JUPYTER, entrypoint=("start.sh",))
CUSTOM_SSH = with_ssh(dataclasses.replace(CUSTOM_SERVICE, command=("python", "serve.py"),
                                          args=("--port", "8080")))


@pytest.mark.parametrize("spec", [JUPYTER_SSH, CUSTOM_SSH], ids=["jupyter", "custom"])
def test_every_object_is_valid_against_the_kubernetes_schema(spec):
    objects = workload_objects(spec)
    for obj in objects:  # raises ValidationError on any field the schema does not know
        kubernetes_validate.validate(obj, kubernetes_validate.utils.latest_version(),
                                     strict=True)
    assert [o["kind"] for o in objects] == ["Secret", "Deployment", "Service"]
    # what was validated holds the SSH pieces: the installer, the wrapper, the server's keys
    pod = objects[1]["spec"]["template"]["spec"]
    assert [c["name"] for c in pod["initContainers"]] == ["ssh-install"]
    assert pod["containers"][0]["command"][1] == "run"
    assert CONFIG_DIR in {m["mountPath"] for m in pod["containers"][0]["volumeMounts"]}


def test_the_wrapper_runs_the_images_entrypoint_and_keeps_the_arguments():
    pod = make_pod_template(JUPYTER_SSH)["spec"]
    app = pod["containers"][0]
    assert app["command"] == [
        f"{BIN_DIR}/gpu-portal-sshd", "run", f"--listen=127.0.0.1:{SSH_PORT}",
        f"--config-dir={CONFIG_DIR}", "--workload=42", "--portal=http://portal.example:8000",
        "--check-interval=30s", "--", "start.sh"]
    assert app["args"] == list(JUPYTER.args)
    # a launch's own command is the program, whatever the template's entrypoint
    custom = make_pod_template(CUSTOM_SSH)["spec"]["containers"][0]
    assert custom["command"][-3:] == ["--", "python", "serve.py"]
    assert custom["args"] == ["--port", "8080"]


def test_the_init_container_is_restricted_and_shares_only_the_binary():
    pod = make_pod_template(JUPYTER_SSH)["spec"]
    [init] = pod["initContainers"]
    assert init["command"] == ["/gpu-portal-sshd", "install", BIN_DIR]
    context = init["securityContext"]
    assert context["runAsNonRoot"] is True and context["runAsUser"] > 0
    assert context["allowPrivilegeEscalation"] is False
    assert context["capabilities"] == {"drop": ["ALL"]}
    assert context["seccompProfile"] == {"type": "RuntimeDefault"}
    assert [m["mountPath"] for m in init["volumeMounts"]] == [BIN_DIR]
    app = pod["containers"][0]
    mounts = {m["mountPath"]: m for m in app["volumeMounts"]}
    assert mounts[BIN_DIR]["readOnly"] and mounts[CONFIG_DIR]["readOnly"]
    # the proxy never sees the server's keys, nor the application the proxy's credentials
    proxy = pod["containers"][1]
    assert CONFIG_DIR not in {m["mountPath"] for m in proxy["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    config = next(v for v in volumes.values()
                  if v.get("secret") and v["secret"]["items"][0]["key"] in SECRET_FILES)
    assert {i["key"]: i["path"] for i in config["secret"]["items"]} == SECRET_FILES


def test_every_key_the_server_reads_is_in_the_secret():
    keys = set(make_secret(JUPYTER_SSH)["data"])
    assert set(SECRET_FILES) <= keys
    pod = make_pod_template(JUPYTER_SSH)["spec"]
    for volume in pod["volumes"]:
        if volume.get("secret", {}).get("secretName") == JUPYTER_SSH.name:
            assert {item["key"] for item in volume["secret"]["items"]} <= keys


def test_the_proxy_routes_the_ssh_path_to_the_server_on_loopback():
    config = yaml.safe_load(proxy_files(JUPYTER_SSH.proxy)[CONFIG_KEY])
    upstreams = {u["id"]: u for u in config["upstreamConfig"]["upstreams"]}
    assert upstreams["ssh"] == {"id": "ssh", "path": SSH_PATH,
                                "uri": f"http://127.0.0.1:{SSH_PORT}/"}
    assert upstreams["app"]["uri"] == "http://127.0.0.1:8888/"
    # without SSH, no route to it
    plain = yaml.safe_load(proxy_files(JUPYTER.proxy)[CONFIG_KEY])
    assert [u["id"] for u in plain["upstreamConfig"]["upstreams"]] == ["app"]


def test_an_application_on_the_servers_port_moves_the_server_aside():
    assert ssh_port_beside(SSH_PORT) == SSH_PORT + 1
    assert ssh_port_beside(8888) == SSH_PORT
    moved = with_ssh(dataclasses.replace(CUSTOM_SERVICE, command=("serve",),
                                         port=SSH_PORT, proxy=proxy_for("wl-45-custom", SSH_PORT)),
                     port=SSH_PORT + 1)
    app = make_pod_template(moved)["spec"]["containers"][0]
    assert f"--listen=127.0.0.1:{SSH_PORT + 1}" in app["command"]


@pytest.mark.parametrize("change, message", [
    ({"command": (), "entrypoint": ()}, "no command, no entrypoint"),
    ({"proxy": None}, "only through the proxy"),
    ({"secret_data": PROXY_SECRETS}, "lacks the SSH server's"),
], ids=["no-program", "no-proxy", "no-keys"])
def test_an_ssh_server_that_could_not_work_is_refused(change, message):
    spec = with_ssh(dataclasses.replace(CUSTOM_SERVICE, command=("serve",)))
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(spec, **change)


def test_a_public_workload_asks_the_login_for_the_ssh_path_only():
    public = dataclasses.replace(JUPYTER_SSH.proxy, public=True)
    [route] = [a.split("=", 1)[1] for a in proxy_args(public) if a.startswith("--skip-auth-route")]
    skipped = re.compile(route)
    for path in ("/", "/lab", "/.well-known/openid", "/.gpu-portal", "/.gpu-portal/ss",
                 "/.gpu-portalx/ssh"):
        assert skipped.match(path), path
    for path in (SSH_PATH, f"{SSH_PATH}/", f"{SSH_PATH}x"):
        assert not skipped.match(path), path
    # without SSH, the whole site is open as before
    plain = dataclasses.replace(JUPYTER.proxy, public=True)
    assert "--skip-auth-route=^/" in proxy_args(plain)
    with pytest.raises(ValueError):
        paths_outside("relative")


BATCH_SSH = with_ssh(CUSTOM_BATCH, proxy=dataclasses.replace(proxy_for("wl-7-train", 0),
                                                             upstream_port=None))


def test_a_batch_job_with_ssh_has_its_proxy_as_a_native_sidecar_and_a_service():
    objects = workload_objects(BATCH_SSH)
    assert [o["kind"] for o in objects] == ["Secret", "Job", "Service"]
    for obj in objects:
        kubernetes_validate.validate(obj, kubernetes_validate.utils.latest_version(),
                                     strict=True)
    pod = objects[1]["spec"]["template"]
    # the Job completes when the program ends: the proxy runs beside it as a sidecar
    assert [c["name"] for c in pod["spec"]["containers"]] == ["app"]
    init = pod["spec"]["initContainers"]
    assert [c["name"] for c in init] == ["ssh-install", "auth-proxy"]
    assert init[1]["restartPolicy"] == "Always" and "restartPolicy" not in init[0]
    assert pod["metadata"]["labels"]["gpu-portal.io/exposed"] == "true"
    # no application behind its proxy: only the route to the SSH server
    config = yaml.safe_load(proxy_files(BATCH_SSH.proxy)[CONFIG_KEY])
    assert [u["id"] for u in config["upstreamConfig"]["upstreams"]] == ["ssh"]
    service = objects[2]
    assert service["spec"]["ports"][0]["port"] == BATCH_SSH.proxy.listen_port
    assert service["spec"]["ports"][0]["targetPort"] == "http"
    # without SSH a batch job has neither
    assert [o["kind"] for o in workload_objects(CUSTOM_BATCH)] == ["Job"]


def test_a_batch_proxy_without_ssh_is_refused():
    with pytest.raises(ValueError, match="for SSH only"):
        dataclasses.replace(BATCH_SSH, ssh=None,
                            proxy=dataclasses.replace(BATCH_SSH.proxy, ssh_port=None))
