"""The measurement of bench/files_bench.py, run as a pytest case so that it stands on the files
end-to-end test's own fixtures (tests/files/test_end_to_end.py: the live portal with its real
Keystone, the project's file server started in kubesim and the real gpu-portal-files run on
loopback against a folder). Not part of the suite (`testpaths` is tests/); the parameters and the
output file come in the environment variable FILES_BENCH (JSON).

Two ways to the same server, with the same client (curl, a process of its own):

- through the portal: PUT and GET /api/v1/volumes/{id}/files/content with the user's Keystone
  token: the portal's authentication, the volume's check, the file server found ready, and the
  body streamed on to the server and back;
- direct: PUT and GET /v1/volumes/{claim}/content straight to the server's loopback port with its
  bearer token.
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import subprocess
import time
from pathlib import Path
from urllib.parse import urlencode

import pytest

# the fixtures: those of tests/conftest.py that override pytest-django's are imported here, as
# a plugin (-p tests.conftest, which brings the rest) would come before pytest-django's
from files.server import token_for
from stack.demo_stack import DemoStack
from tests.files.test_end_to_end import DATA
from tests.files.test_end_to_end import files as files  # noqa: F401
from tests.fixtures.database import django_db_setup  # noqa: F401
from tests.fixtures.stack import django_db_modify_db_settings  # noqa: F401
from tests.support.files import demo_volume
from tests.support.gpuctl import portal  # noqa: F401

pytestmark = [pytest.mark.django_db(transaction=True, serialized_rollback=True),
              pytest.mark.timeout(3600)]

WAYS = ("portal", "direct")
PIECE = 1 << 20


def digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(PIECE):
            h.update(chunk)
    return h.hexdigest()


def curl(argv: list[str], headers: dict[str, str]) -> float:
    """Run curl (its own process: the portal's threads have this process's interpreter to
    themselves, as they have a web worker's), failing on an HTTP error; its wall time."""
    command = ["curl", "--silent", "--show-error", "--fail", "--noproxy", "*",
               "-H", "Expect:"]  # no 100-continue round trip: the portal's server has none
    for name, value in headers.items():
        command += ["-H", f"{name}: {value}"]
    start = time.perf_counter()
    done = subprocess.run([*command, *argv], capture_output=True, timeout=1800)
    elapsed = time.perf_counter() - start
    assert done.returncode == 0, done.stderr.decode()
    return elapsed


def upload(url: str, path: str, query: dict[str, str], headers: dict[str, str],
           source: Path) -> float:
    return curl(["-T", str(source), "-o", "/dev/null", f"{url}{path}?{urlencode(query)}"],
                {**headers, "Content-Type": "application/octet-stream"})


def download(url: str, path: str, query: dict[str, str], headers: dict[str, str],
             dest: Path) -> float:
    return curl(["-o", str(dest), f"{url}{path}?{urlencode(query)}"], headers)


def measure(params: dict, ways: dict[str, tuple[str, str, dict[str, str]]], folder: Path,
            tmp_path: Path) -> dict:
    """A random file of params["size_mib"] up, then down, params["runs"] times each way (the
    order swapped every run); `folder`: the volume's folder on this machine."""
    size = params["size_mib"] * 2**20
    source = tmp_path / "random.bin"
    with source.open("wb") as f:
        for _ in range(size // (64 * 2**20)):
            f.write(os.urandom(64 * 2**20))
        f.write(os.urandom(size % (64 * 2**20)))
    want = digest(source)
    # the file server started and found ready once before the clock runs
    upload(*ways["portal"][:2], {"path": "warm.bin"}, ways["portal"][2], Path(__file__))
    up: dict[str, list[float]] = {way: [] for way in WAYS}
    down: dict[str, list[float]] = {way: [] for way in WAYS}
    checks = []
    for run in range(params["runs"]):
        for way in (WAYS if run % 2 == 0 else WAYS[::-1]):
            url, path, headers = ways[way]
            name = f"{way}-{run}.bin"
            up[way].append(size / 2**20 / upload(url, path, {"path": name}, headers, source))
            on_volume = folder / name
            back = tmp_path / f"back-{name}"
            down[way].append(size / 2**20 / download(url, path, {"path": name}, headers, back))
            checks.append(digest(on_volume) == want and digest(back) == want)
            on_volume.unlink()
            back.unlink()
    assert all(checks), "a checksum differs"

    def figures(samples: dict[str, list[float]]) -> dict[str, object]:
        through, direct = statistics.median(samples["portal"]), statistics.median(samples["direct"])
        return {"portal": through, "direct": direct, "ratio": through / direct,
                "runs": {way: [round(v, 1) for v in vs] for way, vs in samples.items()}}

    result = {"size_mib": params["size_mib"], "runs": params["runs"],
              "upload_mib_s": figures(up), "download_mib_s": figures(down),
              "checksums_equal": all(checks)}
    result["goal"] = {"ratio": params["goal"],
                      "met": min(result["upload_mib_s"]["ratio"],  # type: ignore[index]
                                 result["download_mib_s"]["ratio"]) >= params["goal"]}
    return result


def test_files_throughput(files, project_token, tmp_path):  # noqa: F811 - the fixture
    """The portal in pytest-django's live_server (Django's threaded server): the upload read
    through the interpreter."""
    params = json.loads(os.environ["FILES_BENCH"])
    ways = {
        "portal": (files.base, f"/api/v1/volumes/{DATA}/files/content",
                   {"X-Auth-Token": project_token("researcher", "vision-lab")}),
        "direct": (files.server.url, "/v1/volumes/data/content",
                   {"Authorization": f"Bearer {token_for(files.tenant.namespace)}"}),
    }
    result = measure(params, ways, files.root / "data", tmp_path)
    Path(params["out"]).write_text(json.dumps({"web": "live_server", **result}, indent=1))


def test_files_throughput_on_the_demo(tmp_path):
    """The portal as deployed (gunicorn with the image's configuration), on the demo's own
    configuration (stack/demo_stack.py): a volume made through the API, its project's
    gpu-portal-files run on loopback by the demo's files process (stack/demo_files.py); the
    upload spliced from the client's socket (core/body_socket.py)."""
    params = json.loads(os.environ["FILES_BENCH"])
    demo = DemoStack(tmp_path / "demo")
    try:
        demo.start()
        volume = demo_volume(demo, "bench", size_gib=2)
        ways = {"portal": (demo.url, f"/api/v1/volumes/{volume.id}/files/content",
                           volume.auth),
                "direct": (volume.server_url, f"/v1/volumes/{volume.claim}/content",
                           {"Authorization": f"Bearer {volume.token}"})}
        result = measure(params, ways, volume.folder, tmp_path)
    finally:
        demo.close()
    Path(params["out"]).write_text(json.dumps({"web": "gunicorn", **result}, indent=1))
