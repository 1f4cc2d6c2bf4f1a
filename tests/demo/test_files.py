"""A volume's files on the demo, as `make demo` runs it (stack/demo.py's configuration, started
by stack/demo_stack.py on a temporary folder and free ports): the portal behind gunicorn, as
deployed, starts the project's file server in kubesim and the demo's `files` process
(stack/demo_files.py) runs the real gpu-portal-files for it on loopback, serving the project's
claims as folders. An upload through the portal lands in the claim's folder whole, comes back
whole, and the server stops when its Deployment goes (the portal's idle stop)."""

from __future__ import annotations

import hashlib
import os

import pytest
import requests

from files.manifests import NAME
from kube.client import Kube, api_client
from tests.support.files import demo_file_servers, demo_volume
from tests.support.waiting import eventually

pytestmark = pytest.mark.timeout(600)


def test_a_member_uploads_to_a_volume_and_the_demo_serves_it(demo):
    volume = demo_volume(demo, "data")
    content = os.urandom(8 * 2**20 + 5)  # more than one splice through the pipe
    url = f"{demo.url}/api/v1/volumes/{volume.id}/files/content"
    put = requests.put(url, params={"path": "weights.bin"}, data=content,
                       headers={**volume.auth, "Content-Type": "application/octet-stream"},
                       timeout=120)
    assert put.status_code == 201, put.text
    assert put.json()["size"] == len(content)

    # on the project's server, in the claim's folder under the demo's volumes
    on_disk = volume.folder / "weights.bin"
    assert hashlib.sha256(on_disk.read_bytes()).digest() == hashlib.sha256(content).digest()
    got = requests.get(url, params={"path": "weights.bin"}, headers=volume.auth, timeout=120)
    assert got.status_code == 200 and got.content == content
    listed = requests.get(f"{demo.url}/api/v1/volumes/{volume.id}/files/", headers=volume.auth,
                          timeout=30)
    assert sorted(entry["name"] for entry in listed.json()) == [".started", "weights.bin"]
    (namespace,) = demo_file_servers(demo)
    assert f"file server of {namespace}" in demo.log("files")

    # the portal stops an idle server by deleting its objects: the demo's server goes with them
    Kube(api_client(str(demo.kubeconfig))).delete("Deployment", NAME, namespace)
    eventually(lambda: namespace not in demo_file_servers(demo), timeout=60,
               message="the file server outlived its Deployment")
    with pytest.raises(requests.ConnectionError):
        requests.get(f"{volume.server_url}/healthz", timeout=5)
