"""The private registries of the tests (stack/registry.py: CNCF Distribution on loopback), one of
each login per test session, started only by the tests that ask for them; and an image pushed
into one through the registry's own API, as a site's build would push it.

`htpasswd_registry` checks Basic credentials and lets every account read everything;
`token_registry` sends clients to its token service, which grants each account its own
repositories only (the account `other` reads `other/…`, never `team/…`).

The image is an OCI image made here: one small gzip'd tar layer, its config and its manifest,
pushed blob by blob (POST an upload, PUT its bytes with their digest) and then the manifest by
tag: the three calls of the distribution API a push is. No OCI client library: these calls are
all a push of one layer needs, and the portal's side (credentials/pulls.py) is checked against
what the registry answers, not against a client's idea of it.
"""

from __future__ import annotations

import base64
import dataclasses
import gzip
import io
import json
import secrets
import tarfile
import uuid
from collections.abc import Iterator

import httpx
import pytest

from stack.registry import PULL, PUSH, SERVICE, RegistryServer, digest_of

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
TEAM_USER, OTHER_USER = "team-robot", "other-robot"


@dataclasses.dataclass(frozen=True)
class Registry:
    server: RegistryServer
    passwords: dict[str, str]

    @property
    def host(self) -> str:
        return self.server.host


def _registry(tmp_path_factory, auth: str) -> Iterator[Registry]:
    passwords = {TEAM_USER: secrets.token_urlsafe(18), OTHER_USER: secrets.token_urlsafe(18)}
    server = RegistryServer(tmp_path_factory.mktemp(f"registry-{auth}"), auth=auth,
                            users=passwords,
                            grants={TEAM_USER: {"team": (PULL, PUSH)},
                                    OTHER_USER: {"other": (PULL, PUSH)}}).start()
    yield Registry(server=server, passwords=passwords)
    server.stop()


@pytest.fixture(scope="session")
def htpasswd_registry(tmp_path_factory) -> Iterator[Registry]:
    yield from _registry(tmp_path_factory, "htpasswd")


@pytest.fixture(scope="session")
def token_registry(tmp_path_factory) -> Iterator[Registry]:
    yield from _registry(tmp_path_factory, "token")


@pytest.fixture
def registries_allowed(settings, htpasswd_registry, token_registry) -> None:
    """Both registries inside the site's registries; the check on, with a short bound."""
    settings.PORTAL_IMAGE_REGISTRIES = [htpasswd_registry.host, token_registry.host]
    settings.PORTAL_REGISTRY_CHECK_SECONDS = 5


def new_account(registry: Registry, prefix: str = "team") -> str:
    """An account of this test's own that may pull from (and push to) `prefix`/…; its
    password in registry.passwords."""
    user = f"robot-{uuid.uuid4().hex[:8]}"
    registry.passwords[user] = secrets.token_urlsafe(18)
    registry.server.set_password(user, registry.passwords[user], {prefix: (PULL, PUSH)})
    return user


def rotate_password(registry: Registry, user: str) -> str:
    """The account's password changed at the registry, as when a site rotates it; the old
    one, which no longer logs in."""
    old = registry.passwords[user]
    registry.passwords[user] = secrets.token_urlsafe(18)
    registry.server.set_password(user, registry.passwords[user])
    return old


def login_headers(registry: Registry, user: str, repository: str) -> dict[str, str]:
    """What the pusher sends: its Basic credentials, or a token for pull and push on
    `repository` from the token service."""
    password = registry.passwords[user]
    basic = base64.b64encode(f"{user}:{password}".encode()).decode()
    if registry.server.auth == "htpasswd":
        return {"Authorization": f"Basic {basic}"}
    assert registry.server.tokens is not None
    answer = httpx.get(registry.server.tokens.realm, timeout=10,
                       params={"service": SERVICE, "scope": f"repository:{repository}:pull,push"},
                       headers={"Authorization": f"Basic {basic}"})
    answer.raise_for_status()
    return {"Authorization": f"Bearer {answer.json()['token']}"}


def _layer() -> tuple[bytes, str]:
    """A gzip'd tar of one file; and the digest of the tar itself (the config's diff_id)."""
    tar = io.BytesIO()
    body = f"an image of the tests, {uuid.uuid4()}\n".encode()
    with tarfile.open(fileobj=tar, mode="w") as archive:
        info = tarfile.TarInfo("hello.txt")
        info.size, info.mode = len(body), 0o644
        archive.addfile(info, io.BytesIO(body))
    return gzip.compress(tar.getvalue(), mtime=0), digest_of(tar.getvalue())


def _push_blob(client: httpx.Client, repository: str, blob: bytes) -> dict[str, object]:
    started = client.post(f"/v2/{repository}/blobs/uploads/")
    assert started.status_code == 202, started.text
    digest = digest_of(blob)
    location = started.headers["Location"]  # its query holds the upload's signed state
    done = client.put(f"{location}{'&' if '?' in location else '?'}digest={digest}",
                      content=blob, headers={"Content-Type": "application/octet-stream"})
    assert done.status_code == 201, done.text
    return {"digest": digest, "size": len(blob)}


def push_image(registry: Registry, repository: str, tag: str = "v1", *,
               user: str = TEAM_USER) -> str:
    """Push a new small image as `repository:tag`; the manifest's digest."""
    layer, diff_id = _layer()
    config = json.dumps({"architecture": "amd64", "os": "linux",
                         "config": {"Cmd": ["cat", "/hello.txt"]},
                         "rootfs": {"type": "layers", "diff_ids": [diff_id]}}).encode()
    with httpx.Client(base_url=registry.server.url, timeout=30,
                      headers=login_headers(registry, user, repository)) as client:
        layer_descriptor = _push_blob(client, repository, layer)
        config_descriptor = _push_blob(client, repository, config)
        manifest = json.dumps({
            "schemaVersion": 2, "mediaType": OCI_MANIFEST,
            "config": {"mediaType": OCI_CONFIG, **config_descriptor},
            "layers": [{"mediaType": OCI_LAYER, **layer_descriptor}]}).encode()
        answer = client.put(f"/v2/{repository}/manifests/{tag}", content=manifest,
                            headers={"Content-Type": OCI_MANIFEST})
        assert answer.status_code == 201, answer.text
    assert answer.headers["Docker-Content-Digest"] == digest_of(manifest)
    return digest_of(manifest)
