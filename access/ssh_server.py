"""The SSH server in a workload's pod, as pure functions: spec in, manifests out.

`gpu-portal-sshd` (our Go program, sshd/) runs inside the application's container, as its user,
so that a shell sees the application's files, processes and GPUs:

- an init container, run from the server's own image, copies the static binary into an emptyDir
  (`install`); the application's container mounts it read-only at BIN_DIR;
- the application's command becomes `gpu-portal-sshd run <flags> -- <program>`: the wrapper
  serves SSH on the pod's loopback and runs the program as its child (signals forwarded,
  orphans reaped, its exit status the container's). The program is the launch's command, or
  the image's entrypoint as its template names it; the arguments stay the container's `args`;
- its files (the portal CA's public key, the workload's host key, the token it reports sessions
  with) come from the workload's Secret, mounted read-only at CONFIG_DIR;
- nothing listens outside the pod: the workload's authenticating proxy routes SSH_PATH (a
  WebSocket) to the server on 127.0.0.1 (access/proxy.py, ProxySpec.ssh_port).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from tenants.manifests import restricted_container_security

Manifest = dict[str, Any]

SSH_PATH = "/.gpu-portal/ssh"  # the WebSocket's path behind the proxy
SSH_PORT = 4182  # the server's port on the pod's loopback (moves aside for an app on it)
BINARY = "gpu-portal-sshd"
INIT_CONTAINER = "ssh-install"
BIN_VOLUME = "gpu-portal-ssh-bin"
CONFIG_VOLUME = "gpu-portal-ssh-config"
BIN_DIR = "/opt/gpu-portal/bin"
CONFIG_DIR = "/opt/gpu-portal/ssh"
# keys of the workload's Secret → the server's file names in CONFIG_DIR
SECRET_FILES = {"ssh-ca.pub": "ca.pub", "ssh-host-key": "host_key",
                "ssh-report-token": "report_token"}
IMAGE_UID = 65532  # the server image's user (a FROM scratch image: sshd/Dockerfile)
INIT_RESOURCES = {"cpu": "50m", "memory": "32Mi"}


@dataclasses.dataclass(frozen=True)
class SSHServerSpec:
    image: str               # the server's image (settings.PORTAL_SSH_SERVER_IMAGE)
    workload_id: int
    portal_url: str          # where the server reports sessions (…/api/v1/ssh-sessions/)
    secret_name: str         # the workload's Secret, holding SECRET_FILES' keys
    port: int = SSH_PORT
    check_interval_seconds: int = 30


def ssh_port_beside(app_port: int | None) -> int:
    """SSH_PORT, or the next one when the application itself listens there."""
    return SSH_PORT + 1 if app_port == SSH_PORT else SSH_PORT


def run_argv(spec: SSHServerSpec, program: list[str] | tuple[str, ...]) -> list[str]:
    """The container's command: the wrapper, its flags, then the program it runs."""
    argv = [f"{BIN_DIR}/{BINARY}", "run",
            f"--listen=127.0.0.1:{spec.port}",
            f"--config-dir={CONFIG_DIR}",
            f"--workload={spec.workload_id}",
            f"--portal={spec.portal_url}",
            f"--check-interval={spec.check_interval_seconds}s"]
    return [*argv, "--", *program]


def make_init_container(spec: SSHServerSpec) -> Manifest:
    """Copies the binary into the shared emptyDir; "restricted" in every field."""
    return {
        "name": INIT_CONTAINER,
        "image": spec.image,
        "command": [f"/{BINARY}", "install", BIN_DIR],
        "resources": {"requests": dict(INIT_RESOURCES), "limits": dict(INIT_RESOURCES)},
        "securityContext": restricted_container_security(IMAGE_UID),
        "volumeMounts": [{"name": BIN_VOLUME, "mountPath": BIN_DIR}],
    }


def make_volume_mounts() -> list[Manifest]:
    """The application container's mounts: the binary and the server's files, read-only."""
    return [{"name": BIN_VOLUME, "mountPath": BIN_DIR, "readOnly": True},
            {"name": CONFIG_VOLUME, "mountPath": CONFIG_DIR, "readOnly": True}]


def make_volumes(spec: SSHServerSpec) -> list[Manifest]:
    """The emptyDir for the binary, and only the server's keys of the workload's Secret
    (readable by whatever user the image runs as: the server runs as that user)."""
    return [
        {"name": BIN_VOLUME, "emptyDir": {"sizeLimit": "64Mi"}},
        {"name": CONFIG_VOLUME,
         "secret": {"secretName": spec.secret_name, "defaultMode": 0o444,
                    "items": [{"key": key, "path": name}
                              for key, name in SECRET_FILES.items()]}},
    ]
