"""Fixtures of the usage tests: tenants and workloads without Keystone, a loopback exporter."""

from __future__ import annotations

import datetime as dt
import http.server
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from django.contrib.auth import get_user_model

from tenants.models import Tenant
from tests.fixtures import factories
from usage import scrape
from workloads.models import Workload

T0 = dt.datetime(2025, 3, 3, 10, 0, tzinfo=dt.UTC)


@pytest.fixture(autouse=True)
def _fresh_kubesim_check():
    """The 'is the API server kubesim?' answer is remembered per process; tests start clean."""
    scrape._kubesim_checked.clear()
    yield
    scrape._kubesim_checked.clear()


@pytest.fixture
def tenants(db) -> dict[str, Tenant]:
    return {name: Tenant.objects.create(keystone_project_id=f"project-{name}", name=name,
                                        namespace=f"gpu-{name}", state="provisioned")
            for name in ("alpha", "beta")}


@pytest.fixture
def users(db):
    model = get_user_model()
    return {name: model.objects.create(username=name, keystone_user_id=f"id-{name}")
            for name in ("ann", "bob")}


def make_workload(tenant: Tenant, owner, *, started_at: dt.datetime | None = T0,
                  finished_at: dt.datetime | None = None, **fields) -> Workload:
    """A workload row as the tracker leaves it (no cluster objects): running since T0, or
    succeeded once it has finished."""
    state = Workload.State.RUNNING if finished_at is None else Workload.State.SUCCEEDED
    return factories.make_workload(tenant, owner, state=state, started_at=started_at,
                                   finished_at=finished_at, **fields)


def sample_row(at: dt.datetime, workload: Workload | None, *, uuid: str = "GPU-aaaa",
               util: float = 50.0, memory: int = 1000, node: str = "node-1", index: int = 0,
               scope: str = "") -> tuple:
    """One raw sample in services.SAMPLE_COLUMNS order."""
    return (at, node, index, uuid, "", workload.pk if workload else None,
            workload.tenant_id if workload else None,
            workload.tenant.namespace if workload else "",
            f"{workload.object_name}-abc12" if workload else "", util, memory, 81920, 40.0,
            200.0, 0, 0, scope)


class Exporter:
    """A loopback HTTP server answering whatever `handler(path) -> (status, body, delay)`
    says: good DCGM text, garbage, an error, or an answer that takes too long."""

    def __init__(self, respond: Callable[[str], tuple[int, bytes, float]]) -> None:
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the http.server API
                outer.requests += 1
                status, body, delay = respond(self.path)
                if delay:
                    time.sleep(delay)
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "text/plain; version=0.0.4")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def log_message(self, *args) -> None:
                pass

        self.requests = 0
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def exporter() -> Iterator[Callable[..., Exporter]]:
    started: list[Exporter] = []

    def _start(respond: Callable[[str], tuple[int, bytes, float]]) -> Exporter:
        server = Exporter(respond)
        started.append(server)
        return server

    yield _start
    for server in started:
        server.close()


def dcgm_text(devices: list[dict], *, hostname_label: str = "Hostname") -> str:
    """dcgm-exporter's text for devices {node, index, uuid, util, used, free, pod?, namespace?}."""
    lines = []
    for metric, key in (("DCGM_FI_DEV_GPU_UTIL", "util"), ("DCGM_FI_DEV_FB_USED", "used"),
                        ("DCGM_FI_DEV_FB_FREE", "free"), ("DCGM_FI_DEV_GPU_TEMP", "temp"),
                        ("DCGM_FI_DEV_POWER_USAGE", "power"), ("DCGM_FI_DEV_XID_ERRORS", "xid")):
        lines.append(f"# HELP {metric} x")
        lines.append(f"# TYPE {metric} gauge")
        for d in devices:
            labels = (f'gpu="{d["index"]}",UUID="{d["uuid"]}",device="nvidia{d["index"]}",'
                      f'modelName="NVIDIA A100 80GB PCIe",{hostname_label}="{d["node"]}",'
                      f'DCGM_FI_DRIVER_VERSION="535.154.05"')
            if d.get("pod"):
                labels += f',container="c",namespace="{d["namespace"]}",pod="{d["pod"]}"'
            lines.append(f"{metric}{{{labels}}} {d.get(key, 0)}")
    return "\n".join(lines) + "\n"
