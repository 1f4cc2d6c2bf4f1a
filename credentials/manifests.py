"""A secret as Kubernetes objects and as parts of a pod, as pure functions: no client, no
database, no settings.

`stored_data(kind, data)` is what the Kubernetes Secret holds for a secret's data (an `env`
secret's variables, a `file` secret's files, a `registry` secret's .dockerconfigjson, an `s3`
secret's AWS variables and rclone configuration); `make_secret` is that Secret. A launch's use
of a secret is a `SecretUse` (names only: which Secret, which keys, where), frozen in the
workload's launch spec; `pod_env`, `pod_volumes`, `pod_mounts` and `pod_pull_secrets` are what
it adds to each of the workload's pods. A value reaches a pod only by reference: an env var's
`valueFrom.secretKeyRef`, a secret volume, the pod's `imagePullSecrets`; never a literal.
"""

from __future__ import annotations

import base64
import dataclasses
import json
from typing import Any

Manifest = dict[str, Any]

ENV, FILE, REGISTRY, S3 = "env", "file", "registry", "s3"
KINDS = (ENV, FILE, REGISTRY, S3)

DOCKER_CONFIG_KEY = ".dockerconfigjson"
DOCKER_CONFIG_TYPE = "kubernetes.io/dockerconfigjson"
RCLONE_KEY = "rclone.conf"
# the variables every AWS SDK, the AWS CLI and boto3 read; `s3` secrets' fields → them
S3_ENV = {"access_key": "AWS_ACCESS_KEY_ID", "secret_key": "AWS_SECRET_ACCESS_KEY",
          "endpoint": "AWS_ENDPOINT_URL", "region": "AWS_DEFAULT_REGION"}
S3_FIELDS = ("endpoint", "bucket", "access_key", "secret_key", "region")
S3_REQUIRED = ("endpoint", "bucket", "access_key", "secret_key")
REGISTRY_FIELDS = ("server", "username", "password")
RCLONE_CONFIG_ENV = "RCLONE_CONFIG"
# where a `file` or `s3` secret is mounted when the launch names no path
DEFAULT_MOUNT_DIR = "/run/secrets"
VOLUME_PREFIX = "portal-secret"
READ_ONLY_MODE = 0o444  # a secret volume's files: readable by the container's user, not writable


def rclone_config(name: str, data: dict[str, str]) -> str:
    """An rclone configuration with the remote `<name>-s3` (the S3 server) and `<name>` (its
    bucket: `rclone ls <name>:` lists it)."""
    lines = [f"[{name}-s3]", "type = s3", "provider = Other", "env_auth = false",
             f"access_key_id = {data['access_key']}",
             f"secret_access_key = {data['secret_key']}",
             f"endpoint = {data['endpoint']}"]
    if data.get("region"):
        lines.append(f"region = {data['region']}")
    lines += ["", f"[{name}]", "type = alias", f"remote = {name}-s3:{data['bucket']}", ""]
    return "\n".join(lines)


def docker_config(data: dict[str, str]) -> str:
    """A registry login as the kubelet reads it (a .dockerconfigjson)."""
    login = f"{data['username']}:{data['password']}".encode()
    return json.dumps({"auths": {data["server"]: {
        "username": data["username"], "password": data["password"],
        "auth": base64.b64encode(login).decode("ascii")}}}, sort_keys=True)


def stored_data(kind: str, name: str, data: dict[str, str]) -> dict[str, str]:
    """What the Kubernetes Secret of secret `name` holds for its (validated) data."""
    if kind in (ENV, FILE):
        return dict(data)
    if kind == REGISTRY:
        return {DOCKER_CONFIG_KEY: docker_config(data)}
    if kind == S3:
        values = {variable: data[field] for field, variable in S3_ENV.items() if data.get(field)}
        values[RCLONE_KEY] = rclone_config(name, data)
        return values
    raise ValueError(f"kind must be one of {KINDS}, not {kind!r}")


def make_secret(*, namespace: str, object_name: str, kind: str, name: str,
                data: dict[str, str], labels: dict[str, str]) -> Manifest:
    """The Kubernetes Secret that holds a secret's value: the only place it is kept."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": object_name, "namespace": namespace, "labels": dict(labels)},
        "type": DOCKER_CONFIG_TYPE if kind == REGISTRY else "Opaque",
        "data": {key: base64.b64encode(value.encode()).decode("ascii")
                 for key, value in stored_data(kind, name, data).items()},
    }


@dataclasses.dataclass(frozen=True)
class SecretUse:
    """One secret in a launch: its name (shown on the workload), kind, the Kubernetes Secret
    that holds it, its keys as the portal recorded them, and where its files go."""

    name: str
    kind: str
    object_name: str
    keys: tuple[str, ...] = ()
    path: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, not {self.kind!r}")
        if self.kind in (FILE, S3) and not self.path.startswith("/"):
            raise ValueError(f"the {self.kind} secret {self.name} needs an absolute path")
        if self.kind in (ENV, REGISTRY) and self.path:
            raise ValueError(f"the {self.kind} secret {self.name} has no files to mount")

    @property
    def env_names(self) -> tuple[str, ...]:
        """The variables it sets in the container."""
        if self.kind == ENV:
            return self.keys
        if self.kind == S3:
            return (*(S3_ENV[field] for field in S3_ENV if field in self.keys),
                    RCLONE_CONFIG_ENV)
        return ()

    def frozen(self) -> dict[str, Any]:
        """As the launch spec keeps it (JSON)."""
        return {"name": self.name, "kind": self.kind, "object_name": self.object_name,
                "keys": list(self.keys), "path": self.path}

    @classmethod
    def thawed(cls, value: dict[str, Any]) -> SecretUse:
        return cls(name=value["name"], kind=value["kind"], object_name=value["object_name"],
                   keys=tuple(value.get("keys") or ()), path=value.get("path") or "")


def default_path(name: str) -> str:
    return f"{DEFAULT_MOUNT_DIR}/{name}"


def _ref(use: SecretUse, key: str, variable: str) -> Manifest:
    return {"name": variable, "valueFrom": {"secretKeyRef": {"name": use.object_name,
                                                             "key": key}}}


def pod_env(uses: tuple[SecretUse, ...]) -> list[Manifest]:
    """The container's variables from its secrets: each by reference to its Secret's key, and
    for an `s3` secret where its rclone configuration is (a path, no secret)."""
    env: list[Manifest] = []
    for use in uses:
        if use.kind == ENV:
            env += [_ref(use, key, key) for key in use.keys]
        elif use.kind == S3:
            env += [_ref(use, variable, variable)
                    for field, variable in S3_ENV.items() if field in use.keys]
            env.append({"name": RCLONE_CONFIG_ENV, "value": f"{use.path}/{RCLONE_KEY}"})
    return env


def _volume_name(index: int) -> str:
    return f"{VOLUME_PREFIX}-{index}"


def _mounted(uses: tuple[SecretUse, ...]) -> list[tuple[int, SecretUse]]:
    return [(index, use) for index, use in enumerate(uses) if use.kind in (FILE, S3)]


def pod_volumes(uses: tuple[SecretUse, ...]) -> list[Manifest]:
    """A secret volume per `file` secret (every file) and `s3` secret (its rclone.conf)."""
    volumes = []
    for index, use in _mounted(uses):
        source: Manifest = {"secretName": use.object_name, "defaultMode": READ_ONLY_MODE}
        if use.kind == S3:
            source["items"] = [{"key": RCLONE_KEY, "path": RCLONE_KEY}]
        volumes.append({"name": _volume_name(index), "secret": source})
    return volumes


def pod_mounts(uses: tuple[SecretUse, ...]) -> list[Manifest]:
    """Where those volumes are mounted in the container: read-only, at each one's path."""
    return [{"name": _volume_name(index), "mountPath": use.path, "readOnly": True}
            for index, use in _mounted(uses)]


def pod_pull_secrets(uses: tuple[SecretUse, ...]) -> list[Manifest]:
    """The pod's imagePullSecrets: its `registry` secrets."""
    return [{"name": use.object_name} for use in uses if use.kind == REGISTRY]
