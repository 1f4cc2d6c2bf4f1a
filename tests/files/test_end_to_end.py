"""A volume's files with nothing stood in but the volume itself: the real gpuctl and plain HTTP
clients against the live portal (its real Keystone), which starts the project's file server in
the cluster (kubesim: its Deployment made and awaited until ready) and forwards each request,
streamed, to the real gpu-portal-files (filesd/) run on loopback with the pod's flags against a
folder that stands for /volumes, as the SSH tests run the real SSH server.

Which claim a volume id is and who may write it is the storage app's to answer
(files/volumes.py, tested with real volumes in tests/storage/test_api.py); here a table
answers (tests/support/files.py StandInVolumes), so that the claims' folders on loopback can
be named as the server's pod names them.
"""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import pytest
import requests
from django.core.cache import cache

from audit.models import AuditRecord
from core.tasks import send_on_commit
from files.manifests import NAME, ROOT
from files.server import file_server_forget, file_servers_stop_idle, token_for
from kube.client import Conflict, Kube
from storage.manifests import ClaimSpec, make_volume_claim
from tenants.models import Tenant
from tests.support.files import FileServerProcess, StandInVolume, StandInVolumes
from tests.support.gpuctl import live, run
from tests.support.waiting import eventually

pytestmark = [live, pytest.mark.timeout(300)]

DATA, IMAGENET, ELSEWHERE = 1, 2, 3


class Files:
    def __init__(self, env: dict[str, str], server: FileServerProcess, tenant: Tenant,
                 root: Path, outside: Path, base: str) -> None:
        self.env, self.server, self.tenant, self.root, self.outside = env, server, tenant, root, outside
        self.base = base  # the portal's URL

    def url(self, volume: int, endpoint: str = "") -> str:
        return f"{self.base}/api/v1/volumes/{volume}/files/{endpoint}"


@pytest.fixture
def files(portal, live_server, settings, monkeypatch, tmp_path, keystone):
    tenant = Tenant.objects.get(name="vision-lab")
    root, outside = tmp_path / "volumes", tmp_path / "outside"
    for folder in (root / "data" / "runs", root / "imagenet", outside):
        folder.mkdir(parents=True)
    (root / "imagenet" / "labels.txt").write_text("tench\ngoldfish\n")
    (outside / "secret.txt").write_text("outside every volume\n")
    (root / "data" / "out").symlink_to(outside)
    (root / "data" / "secret-link").symlink_to(outside / "secret.txt")
    server = FileServerProcess(root, token_for(tenant.namespace), tmp_path)
    try:
        settings.PORTAL_FILES_URL = server.url
        settings.PORTAL_FILES_START_SECONDS = 30
        StandInVolumes({DATA: StandInVolume(tenant.namespace, "data"),
                        IMAGENET: StandInVolume(tenant.namespace, "imagenet", read_only=True),
                        ELSEWHERE: StandInVolume("gpu-another-project", "data")}).install(monkeypatch)
        kube = Kube()
        for number, claim in enumerate(("data", "imagenet"), 1):  # the claims the server's pod mounts
            try:  # the namespace may be older than this test (another test's), and its claims
                kube.create(make_volume_claim(ClaimSpec(
                    volume_id=number, name=claim, namespace=tenant.namespace,
                    project_id=tenant.keystone_project_id, owner_id="", size_gib=1)))
            except Conflict:
                pass
        file_server_forget(tenant.namespace)  # what an earlier test left in Redis
        yield Files(portal, server, tenant, root, outside, live_server.url)
    finally:  # whatever failed above: the server never outlives its test
        status = server.stop()
    assert status == 0, server.log()  # SIGTERM: a clean stop
    assert token_for(tenant.namespace) not in server.log()


def headers(project_token, user: str = "researcher", project: str = "vision-lab") -> dict:
    return {"X-Auth-Token": project_token(user, project)}


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_a_member_uploads_lists_downloads_moves_and_deletes_with_gpuctl(files, tmp_path):
    content = os.urandom(3 * 2**20 + 17)  # more than one piece of the forwarding
    (tmp_path / "weights.pt").write_bytes(content)
    code, out, err = run(["files", "put", str(tmp_path / "weights.pt"), "1:runs/"], files.env)
    assert code == 0, err
    assert "1:runs/weights.pt" in out
    assert (files.root / "data" / "runs" / "weights.pt").read_bytes() == content
    # the project's file server was started in the cluster, mounting every claim of the project
    deployment = Kube().get("Deployment", NAME, files.tenant.namespace)
    assert deployment is not None
    mounts = deployment["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]
    assert [(m["mountPath"], m["readOnly"]) for m in mounts[1:]] == [
        (f"{ROOT}/data", False), (f"{ROOT}/imagenet", True)]

    code, out, err = run(["files", "ls", "1:runs", "--json"], files.env)
    assert code == 0, err
    assert '"name": "weights.pt"' in out and f'"size": {len(content)}' in out
    code, out, err = run(["files", "get", "1:runs/weights.pt", str(tmp_path / "back.pt")],
                         files.env)
    assert code == 0, err
    assert digest((tmp_path / "back.pt").read_bytes()) == digest(content)

    assert run(["files", "mkdir", "1:runs/epoch-1"], files.env)[0] == 0
    assert run(["files", "mv", "1:runs/weights.pt", "runs/epoch-1/w.pt"], files.env)[0] == 0
    assert (files.root / "data" / "runs" / "epoch-1" / "w.pt").read_bytes() == content
    code, _, err = run(["files", "rm", "1:runs/epoch-1"], files.env)
    assert code == 1 and "folder_not_empty" in err
    assert run(["files", "rm", "1:runs/epoch-1", "--recursive"], files.env)[0] == 0
    assert list((files.root / "data" / "runs").iterdir()) == []
    actions = list(AuditRecord.objects.filter(tenant_id=files.tenant.pk, action__startswith="files.")
                   .order_by("pk").values_list("action", "target"))
    assert actions == [("files.upload", "data:runs/weights.pt"), ("files.folder", "data:runs/epoch-1"),
                       ("files.move", "data:runs/weights.pt"), ("files.delete", "data:runs/epoch-1")]
    # gpuctl's exit code for a volume the caller does not see: not found
    assert run(["files", "ls", f"{ELSEWHERE}:"], files.env)[0] == 6


def test_downloads_take_ranges_and_stream(files, project_token):
    content = os.urandom(2**20)
    (files.root / "data" / "blob.bin").write_bytes(content)
    auth = headers(project_token)
    whole = requests.get(files.url(DATA, "content"), params={"path": "blob.bin"}, headers=auth,
                         timeout=30)
    assert whole.status_code == 200 and whole.content == content
    assert whole.headers["Content-Type"] == "application/octet-stream"
    assert whole.headers["Content-Disposition"] == "attachment; filename=blob.bin"
    part = requests.get(files.url(DATA, "content"), params={"path": "blob.bin"},
                        headers={**auth, "Range": "bytes=1000-1999"}, timeout=30)
    assert part.status_code == 206 and part.content == content[1000:2000]
    assert part.headers["Content-Range"] == f"bytes 1000-1999/{len(content)}"


@pytest.mark.parametrize(("what", "path"), [
    ("a `..`", "../imagenet/labels.txt"),
    ("an absolute path", "/etc/passwd"),
    ("a symbolic link to a folder out", "out/secret.txt"),
    ("a symbolic link to a file out", "secret-link"),
    ("a `..` after a folder", "runs/../../imagenet/labels.txt"),
    ("a `..` after a dot", "./../imagenet"),
    ("a `..` after a trailing slash", "runs//../../x"),
    ("a backslash as the root", "\\etc\\passwd"),
    ("a symbolic link out, then deeper", "out/deeper/x"),
])
def test_paths_that_leave_the_volume_are_refused(files, project_token, what, path):
    auth = headers(project_token)
    ways = [("GET", "content", {}), ("PUT", "content", {"data": b"pwned"}), ("GET", "", {})]
    if path != "secret-link":  # deleting a link deletes the link (below), inside the volume
        ways.append(("DELETE", "content", {}))
    for method, endpoint, kwargs in ways:
        answer = requests.request(method, files.url(DATA, endpoint), params={"path": path},
                                  headers=auth, timeout=30, **kwargs)
        assert answer.status_code == 400, (method, endpoint, answer.text)
        assert answer.json()["code"] == "path_outside"
        assert answer.json()["category"] == "invalid"
    answer = requests.post(files.url(DATA, "moves/"), json={"from": "runs", "to": f"{path}/x"},
                           headers=auth, timeout=30)
    assert answer.status_code == 400 and answer.json()["code"] == "path_outside"
    if path == "secret-link":
        answer = requests.delete(files.url(DATA, "content"), params={"path": path},
                                 headers=auth, timeout=30)
        assert answer.status_code == 204 and not (files.root / "data" / path).is_symlink()
    assert (files.outside / "secret.txt").read_text() == "outside every volume\n"
    assert sorted(p.name for p in files.outside.iterdir()) == ["secret.txt"]


def test_who_may_read_and_write(files, project_token):
    # a reader reads, and may not write
    viewer = headers(project_token, "viewer")
    assert requests.get(files.url(DATA), headers=viewer, timeout=30).status_code == 200
    answer = requests.put(files.url(DATA, "content"), params={"path": "x"}, data=b"x",
                          headers=viewer, timeout=30)
    assert answer.status_code == 403 and answer.json()["category"] == "forbidden"
    # a read-only volume refuses its members' writes too
    member = headers(project_token)
    labels = requests.get(files.url(IMAGENET, "content"), params={"path": "labels.txt"},
                          headers=member, timeout=30)
    assert labels.content == b"tench\ngoldfish\n"
    answer = requests.delete(files.url(IMAGENET, "content"), params={"path": "labels.txt"},
                             headers=member, timeout=30)
    assert answer.status_code == 403
    # another project's volume, and a volume no one has: 404 alike
    for volume in (ELSEWHERE, 99):
        answer = requests.get(files.url(volume), headers=member, timeout=30)
        assert answer.status_code == 404 and answer.json()["code"] == "not_found"
    # no token: 401
    assert requests.get(files.url(DATA), timeout=30).status_code == 401


def test_an_upload_over_the_sites_bound_is_refused_before_a_byte_is_sent(files, project_token,
                                                                       settings):
    settings.PORTAL_FILES_MAX_UPLOAD_BYTES = 1000
    answer = requests.put(files.url(DATA, "content"), params={"path": "big.bin"},
                          data=b"x" * 1001, headers=headers(project_token), timeout=30)
    assert answer.status_code == 413 and answer.json()["code"] == "upload_too_large"
    assert not (files.root / "data" / "big.bin").exists()
    assert "PUT" not in files.server.log()


def test_an_idle_file_server_is_stopped_and_started_again_on_demand(files, project_token,
                                                                    settings):
    auth = headers(project_token)
    assert requests.get(files.url(DATA), headers=auth, timeout=30).status_code == 200
    kube, namespace = Kube(), files.tenant.namespace
    assert kube.get("Deployment", NAME, namespace) is not None
    # used just now: left running
    assert file_servers_stop_idle() == []
    later = time.time() + settings.PORTAL_FILES_IDLE_MINUTES * 60 + 1
    assert file_servers_stop_idle(now=later) == [namespace]
    eventually(lambda: kube.get("Deployment", NAME, namespace) is None, timeout=30)
    assert kube.get("Service", NAME, namespace) is None and kube.get("Secret", NAME, namespace) is None
    # the next request starts it again
    assert requests.get(files.url(DATA), headers=auth, timeout=60).status_code == 200
    assert kube.get("Deployment", NAME, namespace) is not None
    # stopped on demand too (a volume taken away: its claim is released once the pod is gone),
    # by the task a writer sends by name
    send_on_commit("files.tasks.file_server_stop_task", namespace)
    eventually(lambda: kube.get("Deployment", NAME, namespace) is None, timeout=30)
    assert cache.get(f"files:ready:{namespace}") is None


def test_a_file_server_that_does_not_answer_is_a_503_to_retry(files, project_token):
    auth = headers(project_token)
    assert requests.get(files.url(DATA), headers=auth, timeout=30).status_code == 200
    assert files.server.stop() == 0
    answer = requests.get(files.url(DATA), headers=auth, timeout=30)
    assert answer.status_code == 503, answer.text
    assert answer.json()["code"] == "files_unavailable"
    assert answer.json()["category"] == "unavailable"
    assert answer.headers["Retry-After"] == "5"
    # and the portal asks the cluster again next time, not its memory of a ready server
    assert cache.get(f"files:ready:{files.tenant.namespace}") is None


def test_the_file_browser_page(files, as_user):
    (files.root / "data" / "notes.txt").write_text("epoch 3: loss 0.21\n")
    researcher = as_user("researcher")
    page = researcher.get("/volumes/1/files/")
    assert page.status_code == 200
    text = page.content.decode()
    assert "runs/" in text and "/api/v1/volumes/1/files/content?path=notes.txt" in text
    assert "data-file-upload" in text  # a member may upload here
    answer = researcher.post("/volumes/1/files/?path=runs", {"action": "folder", "path": "ep-1"})
    assert answer.status_code == 302 and answer["Location"] == "/volumes/1/files/?path=runs"
    assert (files.root / "data" / "runs" / "ep-1").is_dir()
    researcher.post("/volumes/1/files/", {"action": "move", "source": "notes.txt",
                                          "to": "runs/notes.txt"})
    assert (files.root / "data" / "runs" / "notes.txt").exists()
    page = researcher.get("/volumes/1/files/?path=runs")
    assert "ep-1/" in page.content.decode() and "notes.txt" in page.content.decode()
    researcher.post("/volumes/1/files/?path=runs", {"action": "delete", "path": "runs/ep-1"})
    assert not (files.root / "data" / "runs" / "ep-1").exists()
    # a way out is refused on the page as in the API, and said so
    answer = researcher.post("/volumes/1/files/", {"action": "folder", "path": "../escape"},
                             follow=True)
    assert "the path leaves the volume" in answer.content.decode()
    assert not (files.root / "escape").exists()
    # a reader sees the files, no change forms, and a change is refused
    viewer = as_user("viewer")
    page = viewer.get("/volumes/1/files/?path=runs")
    assert page.status_code == 200 and "notes.txt" in page.content.decode()
    assert "data-file-upload" not in page.content.decode()
    answer = viewer.post("/volumes/1/files/", {"action": "delete", "path": "runs/notes.txt"},
                         follow=True)
    assert "not change them" in answer.content.decode()
    assert (files.root / "data" / "runs" / "notes.txt").exists()
    # another project's volume is not found
    assert researcher.get(f"/volumes/{ELSEWHERE}/files/").status_code == 404


@pytest.mark.parametrize("name", ["a\nb", "line\r\nSet-Cookie: x=1", "%2e%2e", "back\\slash",
                                  "é-ünïcode", "trailing-space ", "x" * 255])
def test_odd_names_stay_inside_and_come_back_as_they_went(files, project_token, name):
    """Names that are no path escape (a line break, a percent sign, a backslash are characters
    of a Linux name) are files of the volume like any other; a download names them in a
    header that carries no line of its own."""
    auth = headers(project_token)
    put = requests.put(files.url(DATA, "content"), params={"path": f"runs/{name}"}, data=b"odd",
                       headers=auth, timeout=30)
    assert put.status_code == 201, put.text
    assert (files.root / "data" / "runs" / name).read_bytes() == b"odd"
    got = requests.get(files.url(DATA, "content"), params={"path": f"runs/{name}"}, headers=auth,
                       timeout=30)
    assert got.status_code == 200 and got.content == b"odd"
    assert "Set-Cookie" not in got.headers and "\n" not in got.headers["Content-Disposition"]
    listed = requests.get(files.url(DATA), params={"path": "runs"}, headers=auth, timeout=30)
    assert name in [entry["name"] for entry in listed.json()]
    assert sorted(p.name for p in files.outside.iterdir()) == ["secret.txt"]
