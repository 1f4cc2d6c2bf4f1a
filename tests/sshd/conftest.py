from __future__ import annotations

import os
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric import ed25519

from stack.k8s import build
from tests.sshd.harness import (
    Client,
    ScriptedPortal,
    Sshd,
    UserKey,
    openssh_private,
    openssh_public,
)


@pytest.fixture(scope="session")
def binary() -> Path:
    return build.ensure("portal-sshd", quiet=True)["gpu-portal-sshd"]


@pytest.fixture(scope="session")
def ca() -> ed25519.Ed25519PrivateKey:
    return ed25519.Ed25519PrivateKey.generate()


@pytest.fixture(scope="session")
def host_key() -> ed25519.Ed25519PrivateKey:
    return ed25519.Ed25519PrivateKey.generate()


@pytest.fixture
def portal():
    portal = ScriptedPortal()
    yield portal
    portal.close()


@pytest.fixture
def home(tmp_path) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    return home


@pytest.fixture
def start_sshd(binary, ca, host_key, portal, home, tmp_path):
    """Start gpu-portal-sshd (reporting to the scripted portal unless told another URL or None)
    and wait until it serves; stopped after the test."""
    started: list[Sshd] = []

    def start(*, program: list[str] | None = None, portal_url: str | None | bool = True,
              env: dict[str, str] | None = None, wait: bool = True, **kwargs) -> Sshd:
        workdir = tmp_path / f"sshd-{len(started)}"
        workdir.mkdir()
        sshd = Sshd(binary, workdir, ca_public=openssh_public(ca),
                    host_key=openssh_private(host_key),
                    portal_url=portal.url if portal_url is True else portal_url or None,
                    program=["sleep", "300"] if program is None else program,
                    env=env if env is not None else {**os.environ, "HOME": str(home)}, **kwargs)
        started.append(sshd)
        return sshd.wait_serving() if wait else sshd

    yield start
    for sshd in started:
        sshd.stop()


@pytest.fixture
def client(host_key, tmp_path):
    def make(sshd: Sshd, **kwargs) -> Client:
        return Client(sshd, tmp_path, openssh_public(host_key), **kwargs)
    return make


@pytest.fixture
def alice(ca, tmp_path) -> UserKey:
    key = UserKey(tmp_path / "id_alice")
    key.certify(ca)
    return key
