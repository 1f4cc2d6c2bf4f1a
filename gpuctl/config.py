"""Where gpuctl's credentials come from: the usual OpenStack variables (an openrc file), or an
entry of clouds.yaml named by OS_CLOUD / --os-cloud, read with PyYAML (no openstacksdk).

clouds.yaml is looked up where openstacksdk looks: $OS_CLIENT_CONFIG_FILE, ./clouds.yaml,
~/.config/openstack/clouds.yaml, /etc/openstack/clouds.yaml (the first that exists). The
portal's address is GPU_PORTAL_URL, --portal-url, or `gpu_portal_url` in the cloud's entry.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

from .errors import GpuctlError


class ConfigError(GpuctlError):
    """The configuration is missing or unusable (exit code 2)."""

    category = "usage"


@dataclasses.dataclass(frozen=True)
class Credentials:
    auth_url: str
    username: str | None = None
    password: str | None = None
    user_id: str | None = None
    user_domain_name: str | None = None
    user_domain_id: str | None = None
    project_name: str | None = None
    project_id: str | None = None
    project_domain_name: str | None = None
    project_domain_id: str | None = None
    application_credential_id: str | None = None
    application_credential_secret: str | None = None
    application_credential_name: str | None = None
    token: str | None = None
    cacert: str | None = None
    insecure: bool = False

    @property
    def method(self) -> str:
        if self.application_credential_secret:
            return "application_credential"
        if self.token:
            return "token"
        return "password"


@dataclasses.dataclass(frozen=True)
class Config:
    credentials: Credentials
    portal_url: str
    source: str  # "environment" or "clouds.yaml:<path>#<cloud>", for messages


def clouds_yaml_paths(env: Mapping[str, str]) -> list[Path]:
    paths = []
    if env.get("OS_CLIENT_CONFIG_FILE"):
        paths.append(Path(env["OS_CLIENT_CONFIG_FILE"]))
    home = Path(env.get("HOME") or Path.home())
    paths += [Path.cwd() / "clouds.yaml", home / ".config" / "openstack" / "clouds.yaml",
              Path("/etc/openstack/clouds.yaml")]
    return paths


def _truthy(value: Any) -> bool:
    return str(value).strip().lower() in ("1", "true", "yes", "on")


def _text(value: Any) -> str | None:
    """A clouds.yaml value as a credential: YAML may read a password of digits as a number."""
    return None if value is None or value == "" else str(value)


def _credentials(auth_url: str, get: Callable[[str], str | None]) -> Credentials:
    """Credentials from `get(key)` for each of the auth keys but the URL."""
    return Credentials(
        auth_url=auth_url, username=get("username"), password=get("password"),
        user_id=get("user_id"), user_domain_name=get("user_domain_name"),
        user_domain_id=get("user_domain_id"), project_name=get("project_name"),
        project_id=get("project_id"), project_domain_name=get("project_domain_name"),
        project_domain_id=get("project_domain_id"),
        application_credential_id=get("application_credential_id"),
        application_credential_secret=get("application_credential_secret"),
        application_credential_name=get("application_credential_name"), token=get("token"))


def from_clouds_yaml(cloud: str, env: Mapping[str, str]
                     ) -> tuple[Credentials, dict[str, Any], str]:
    for path in clouds_yaml_paths(env):
        if not path.is_file():
            continue
        try:
            data = yaml.safe_load(path.read_text()) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise ConfigError(f"{path}: cannot read it: {exc}") from exc
        clouds = data.get("clouds") or {}
        if cloud not in clouds:
            continue
        entry = clouds[cloud] or {}
        auth = dict(entry.get("auth") or {})
        if not auth.get("auth_url"):
            raise ConfigError(f"{path}: cloud {cloud!r} has no auth.auth_url")
        verify = entry.get("verify", True)
        given = {key: _text(value) for key, value in auth.items()}
        credentials = dataclasses.replace(
            _credentials(str(auth["auth_url"]), given.get),
            cacert=_text(entry.get("cacert")) or (verify if isinstance(verify, str) else None),
            insecure=verify is False or _truthy(entry.get("insecure", False)))
        return credentials, entry, f"clouds.yaml:{path}#{cloud}"
    searched = ", ".join(str(p) for p in clouds_yaml_paths(env))
    raise ConfigError(f"no cloud named {cloud!r} in clouds.yaml (looked in {searched})")


def from_environment(env: Mapping[str, str]) -> Credentials:
    def get(name: str) -> str | None:
        value = env.get(f"OS_{name.upper()}")
        return value or None

    auth_url = get("auth_url")
    if not auth_url:
        raise ConfigError("no credentials: set OS_AUTH_URL and friends (source your openrc), "
                          "or OS_CLOUD for a clouds.yaml entry")
    return dataclasses.replace(_credentials(auth_url, get), cacert=get("cacert"),
                               insecure=_truthy(env.get("OS_INSECURE", "")))


def load(*, env: Mapping[str, str] | None = None, cloud: str | None = None,
         portal_url: str | None = None) -> Config:
    env = os.environ if env is None else env
    cloud = cloud or env.get("OS_CLOUD") or None
    entry: dict[str, Any] = {}
    if cloud:
        credentials, entry, source = from_clouds_yaml(cloud, env)
    else:
        credentials, source = from_environment(env), "environment"
    _check(credentials, source)
    url = portal_url or env.get("GPU_PORTAL_URL") or entry.get("gpu_portal_url")
    if not url:
        raise ConfigError("no portal address: set GPU_PORTAL_URL (e.g. http://127.0.0.1:8000) "
                          "or pass --portal-url")
    return Config(credentials=credentials, portal_url=url.rstrip("/"), source=source)


def _check(c: Credentials, source: str) -> None:
    if c.method == "application_credential":
        if not (c.application_credential_id or c.application_credential_name):
            raise ConfigError(f"{source}: an application credential secret needs its id "
                              "(OS_APPLICATION_CREDENTIAL_ID)")
        return
    if c.method == "token":
        if not (c.project_name or c.project_id):
            raise ConfigError(f"{source}: a token needs a project (OS_PROJECT_NAME)")
        return
    missing = [name for name, value in (("OS_USERNAME", c.username or c.user_id),
                                        ("OS_PASSWORD", c.password),
                                        ("OS_PROJECT_NAME", c.project_name or c.project_id))
               if not value]
    if missing:
        raise ConfigError(f"{source}: missing {', '.join(missing)} (the portal needs a token "
                          "scoped to a project: the project is the tenant)")
