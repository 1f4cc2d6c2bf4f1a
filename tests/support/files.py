"""gpu-portal-files (filesd/) run on loopback as a project's pod runs it: the same flags, a root
with a folder per claim, the token from a file; and a table standing in for the volumes at
the seam the file API asks (files/volumes.py), naming which claim each volume id is and who
may write it, so that a test's claims can be folders on loopback."""

from __future__ import annotations

import dataclasses
import json
import signal
import subprocess
from pathlib import Path

import pytest
import requests

from files import volumes
from files.manifests import NAME, ClaimMount
from files.volumes import VolumeFiles, VolumeUnknown
from identity.roles import PortalRole
from kube.client import Kube, api_client
from stack.burst import keystone_token
from stack.demo_files import token_of
from stack.demo_stack import DemoStack
from stack.identities import USERS
from stack.k8s import build
from stack.procs import free_port
from tests.support.waiting import eventually


class FileServerProcess:
    """`gpu-portal-files --root ROOT --token-file …`, stderr to a log file; stop() sends
    SIGTERM, as the kubelet does, and returns the exit status."""

    def __init__(self, root: Path, token: str, workdir: Path, *, max_upload_bytes: int = 0):
        self.root = root
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        token_file = workdir / "token"
        token_file.write_text(token + "\n")
        token_file.chmod(0o600)
        self.log_file = workdir / "files.log"
        binary = build.ensure("portal-files", quiet=True)["gpu-portal-files"]
        with open(self.log_file, "wb") as log:
            self.proc = subprocess.Popen(
                [str(binary), "--listen", f"127.0.0.1:{self.port}", "--root", str(root),
                 "--token-file", str(token_file), "--max-upload-bytes", str(max_upload_bytes)],
                stdout=log, stderr=subprocess.STDOUT)
        eventually(lambda: requests.get(f"{self.url}/healthz", timeout=2).status_code == 204,
                   timeout=30, ignoring=(requests.ConnectionError,),
                   message=lambda: f"the file server never served: {self.log()}")

    def log(self) -> str:
        return self.log_file.read_text(errors="replace")

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise
        return self.proc.returncode


@dataclasses.dataclass(frozen=True)
class StandInVolume:
    """A volume as the storage app answers for it: its tenant's namespace, its claim,
    read-only or not."""
    namespace: str
    claim: str
    read_only: bool = False


class StandInVolumes:
    """files/volumes.py's two answers from a table of volumes: a volume is seen by the members
    of its tenant's project (readers too), written by members and managers unless read-only;
    another project's is unknown."""

    def __init__(self, table: dict[int, StandInVolume]) -> None:
        self.table = table

    def volume_files(self, *, identity, tenant, volume_id: int) -> VolumeFiles:
        volume = self.table.get(volume_id)
        if volume is None or volume.namespace != tenant.namespace:
            raise VolumeUnknown(volume_id)
        writable = identity.role is not None and identity.role >= PortalRole.MEMBER
        return VolumeFiles(tenant=tenant, claim=volume.claim,
                           writable=writable and not volume.read_only)

    def project_claims(self, tenant) -> list[ClaimMount]:
        return [ClaimMount(v.claim, read_only=v.read_only) for v in self.table.values()
                if v.namespace == tenant.namespace]

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(volumes, "volume_files", self.volume_files)
        monkeypatch.setattr(volumes, "project_claims", self.project_claims)


@dataclasses.dataclass(frozen=True)
class DemoVolume:
    """A member's volume on a running demo (stack/demo_stack.py), bound, its project's file
    server started by a first upload: `auth` the member's headers, `folder` the claim's folder
    where the demo's files process serves it, `server_url` and `token` that server's."""
    id: int
    claim: str
    auth: dict[str, str]
    folder: Path
    server_url: str
    token: str


def demo_volume(demo: DemoStack, name: str, size_gib: int = 1, *, user: str = "researcher",
                project: str = "vision-lab") -> DemoVolume:
    password = next(u.password for u in USERS if u.name == user)
    auth = {"X-Auth-Token": keystone_token(demo.keystone.url, user, password, project)}
    api = f"{demo.url}/api/v1"
    made = requests.post(f"{api}/volumes/", json={"name": name, "size_gib": size_gib,
                                                  "scope": "user"}, headers=auth, timeout=60)
    assert made.status_code == 201, made.text

    def bound() -> dict | None:
        found = requests.get(f"{api}/volumes/{made.json()['id']}/", headers=auth,
                             timeout=30).json()
        return found if found["state"] == "bound" else None

    volume = eventually(bound, timeout=60, message=f"the volume {name} was not bound")
    started = requests.put(f"{api}/volumes/{volume['id']}/files/content",
                           params={"path": ".started"}, data=b"",
                           headers={**auth, "Content-Type": "application/octet-stream"},
                           timeout=120)
    assert started.status_code == 201, started.text
    (namespace,) = demo_file_servers(demo)  # the one project's
    secret = Kube(api_client(str(demo.kubeconfig))).get("Secret", NAME, namespace)
    token = token_of(secret)
    assert token is not None
    return DemoVolume(id=volume["id"], claim=volume["claim_name"], auth=auth,
                      folder=demo.layout.volumes / namespace / volume["claim_name"],
                      server_url=demo_file_servers(demo)[namespace], token=token)


def demo_file_servers(demo: DemoStack) -> dict[str, str]:
    """The demo's file servers now: namespace → URL (its address file)."""
    path = demo.layout.files_addresses
    return json.loads(path.read_text()) if path.exists() else {}
