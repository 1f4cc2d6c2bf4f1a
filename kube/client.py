"""The portal's only door to Kubernetes: the official `kubernetes` client, as plain dicts.

Objects go in and come out in their JSON shape (camelCase dicts), the same shape the pure
manifest functions build, so nothing converts between client models and dicts. Failures are
three exceptions: `NotFound` (404), `Conflict` (409: already exists, or a stale
resourceVersion), `KubeRefused` (other 4xx: invalid, forbidden/quota — `.status` is the
Status body), and `KubeUnavailable` (no connection, timeouts, 5xx).
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import os
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import urllib3
import yaml
from django.conf import settings
from django.utils import timezone
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.rest import ApiException

from . import status as cluster_status
from .hooks import CLUSTER_CONNECTIONS, ClusterConnection

log = logging.getLogger(__name__)

TIMEOUT = (3.0, 15.0)  # connect, read (seconds)
# A watch is quiet between changes, so its read timeout must outlast the server's own
# timeoutSeconds (which ends the stream cleanly); this much longer, then it counts as a hang.
WATCH_READ_SLACK = 10.0


class KubeError(Exception):
    def __init__(self, message: str, *, code: int | None = None, status: dict[str, Any] | None = None):
        super().__init__(message)
        self.code = code
        self.status = status or {}


class NotFound(KubeError):
    pass


class Conflict(KubeError):
    pass


class KubeRefused(KubeError):
    """The API server refused the request (422 invalid, 403 forbidden/quota, 400 …)."""


class NotAuthorized(KubeRefused):
    """401, or a 403 from the authorizer (`… is forbidden: User "…" cannot …`), not from
    admission (quota, Pod Security): the portal's own identity was refused. An API server that
    has just started refuses so until its RBAC caches are in; a misconfigured ClusterRole refuses
    so for good. Work that must not be lost retries it for a while, as an outage."""


class KubeUnavailable(KubeError):
    """The API server could not be reached or failed on its side."""


class Expired(KubeError):
    """410 Gone/Expired: the resourceVersion asked for has left the server's history (a watch
    fell too far behind, or etcd compacted). The caller relists and watches from the new list."""


@dataclass(frozen=True)
class Kind:
    """Where the API server serves a kind: its group ("" for the core group), version and
    plural, the path every verb is built from. The requests go out through the client's
    ApiClient (its credentials, TLS, pool and retries) without its typed API classes: those
    build a pydantic validator per method and model when first touched, a second of CPU in
    every process for calls whose answers are read as plain JSON anyway."""

    version: str
    plural: str
    group: str = ""
    namespaced: bool = True
    # a custom resource takes a JSON merge patch; the built-in kinds a strategic merge patch,
    # which merges lists of named items (containers, ports) as the typed client sent it
    custom: bool = False

    def path(self, namespace: str | None, name: str | None = None,
             subresource: str = "") -> tuple[str, dict[str, str]]:
        """The resource path (its parameters apart, for the client to quote) of the collection,
        or of `name` in it. A namespaced kind without a namespace is its collection across all
        namespaces, which is only listed or watched."""
        path = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        params: dict[str, str] = {}
        if self.namespaced and namespace is not None:
            path += "/namespaces/{namespace}"
            params["namespace"] = namespace
        path += f"/{self.plural}"
        if name is not None:
            path += "/{name}"
            params["name"] = name
        return path + (f"/{subresource}" if subresource else ""), params


def _custom(group: str, version: str, plural: str, *, namespaced: bool = True) -> Kind:
    return Kind(version, plural, group, namespaced=namespaced, custom=True)


def _kueue(plural: str, *, namespaced: bool) -> Kind:
    return _custom("kueue.x-k8s.io", "v1beta2", plural, namespaced=namespaced)


KINDS: dict[str, Kind] = {
    "Namespace": Kind("v1", "namespaces", namespaced=False),
    "Node": Kind("v1", "nodes", namespaced=False),
    "ResourceQuota": Kind("v1", "resourcequotas"),
    "LimitRange": Kind("v1", "limitranges"),
    "ServiceAccount": Kind("v1", "serviceaccounts"),
    "Secret": Kind("v1", "secrets"),
    "Service": Kind("v1", "services"),
    "Endpoints": Kind("v1", "endpoints"),
    "PersistentVolumeClaim": Kind("v1", "persistentvolumeclaims"),
    # volumes (storage/): the classes an admin offers are checked against the cluster's; a
    # PersistentVolume is only made by tests of binding on a real control plane
    "PersistentVolume": Kind("v1", "persistentvolumes", namespaced=False),
    "StorageClass": Kind("v1", "storageclasses", "storage.k8s.io", namespaced=False),
    "Pod": Kind("v1", "pods"),
    "Event": Kind("v1", "events"),
    "NetworkPolicy": Kind("v1", "networkpolicies", "networking.k8s.io"),
    # a service's route through the shared gateway (PORTAL_SERVICE_EXPOSURE=shared)
    "Ingress": Kind("v1", "ingresses", "networking.k8s.io"),
    "RoleBinding": Kind("v1", "rolebindings", "rbac.authorization.k8s.io"),
    "Deployment": Kind("v1", "deployments", "apps"),
    "Job": Kind("v1", "jobs", "batch"),
    # Kueue (tenants/kueue.py, workloads/queue.py): served only where it is installed
    "ResourceFlavor": _kueue("resourceflavors", namespaced=False),
    "ClusterQueue": _kueue("clusterqueues", namespaced=False),
    "Cohort": _kueue("cohorts", namespaced=False),  # a department's (tenants/kueue.py)
    "LocalQueue": _kueue("localqueues", namespaced=True),
    "WorkloadPriorityClass": _kueue("workloadpriorityclasses", namespaced=False),
    "Workload": _kueue("workloads", namespaced=True),
    # MultiKueue on the home cluster, the manager of its workers (clusters/dispatch.py)
    "MultiKueueCluster": _kueue("multikueueclusters", namespaced=False),
    "MultiKueueConfig": _kueue("multikueueconfigs", namespaced=False),
    "AdmissionCheck": _kueue("admissionchecks", namespaced=False),
    # distributed training (workloads/manifests.py): served only where JobSet and the MPI
    # operator are installed (kube/engines.py)
    "JobSet": _custom("jobset.x-k8s.io", "v1alpha2", "jobsets"),
    "MPIJob": _custom("kubeflow.org", "v2beta1", "mpijobs"),
    # dynamic resource allocation (workloads/manifests.py, DRA GPU types): served where the
    # cluster serves resource.k8s.io/v1 (kube/dra.py); the classes and slices are what the
    # real control plane's DRA addon writes in place of NVIDIA's driver
    "ResourceClaimTemplate": Kind("v1", "resourceclaimtemplates", "resource.k8s.io"),
    "ResourceClaim": Kind("v1", "resourceclaims", "resource.k8s.io"),
    "DeviceClass": Kind("v1", "deviceclasses", "resource.k8s.io", namespaced=False),
    "ResourceSlice": Kind("v1", "resourceslices", "resource.k8s.io", namespaced=False),
    # MetalLB's address pools, only read (cluster/addresses.py): where it is installed
    "IPAddressPool": _custom("metallb.io", "v1beta1", "ipaddresspools"),
}

POOL_CONNECTIONS = 64

_lock = threading.Lock()
_clients: dict[tuple[int, str | None], k8s.ApiClient] = {}


def api_client(kubeconfig: str | None = None) -> k8s.ApiClient:
    """One ApiClient (connection pool) per process and kubeconfig (default: the setting's)."""
    path = (settings.KUBECONFIG if kubeconfig is None else kubeconfig) or None
    key = (os.getpid(), path)
    with _lock:
        if key not in _clients:
            try:
                _clients[key] = _configured(
                    lambda configuration: k8s_config.load_kube_config(
                        config_file=path, client_configuration=configuration) if path
                    else k8s_config.load_incluster_config(client_configuration=configuration))
            except (k8s_config.ConfigException, OSError) as exc:
                # no kubeconfig and not in a pod: the cluster is as good as unreachable
                raise _unavailable(f"no cluster configured: {exc}") from exc
        return _clients[key]


def _configured(load: Callable[[k8s.Configuration], None]) -> k8s.ApiClient:
    configuration = k8s.Configuration()
    load(configuration)
    configuration.retries = 1
    configuration.connection_pool_maxsize = max(
        configuration.connection_pool_maxsize or 0, POOL_CONNECTIONS)
    return k8s.ApiClient(configuration)


def home_cluster(cluster: str | None) -> str | None:
    """None for the home cluster (the one the portal runs beside, PORTAL_CLUSTER_NAME, or no
    name at all), else the name: the key every per-cluster record of this layer uses."""
    return None if not cluster or cluster == settings.PORTAL_CLUSTER_NAME else cluster


def cluster_connection(cluster: str) -> ClusterConnection:
    """The connection the clusters' registry (hooks.CLUSTER_CONNECTIONS) gives a cluster other
    than the home one; one it does not know (or has disabled) is as good as unreachable."""
    for source in CLUSTER_CONNECTIONS:
        connection = source(cluster)
        if connection is not None:
            return connection
    raise KubeUnavailable(f"no cluster named {cluster!r} is registered and enabled")


def cluster_client(cluster: str | None = None) -> k8s.ApiClient:
    """The ApiClient of a cluster by name (default: the home cluster, the settings'), one per
    process and connection, made on first use."""
    name = home_cluster(cluster)
    if name is None:
        return api_client()
    return connection_client(cluster_connection(name))


def connection_client(connection: ClusterConnection) -> k8s.ApiClient:
    """The ApiClient of another cluster's connection (what a reflector's thread uses: the
    connection is looked up where the read model is asked for, never in the thread)."""
    name = connection.name
    if connection.kubeconfig:
        return api_client(connection.kubeconfig)
    if not connection.secret:
        raise _unavailable(f"cluster {name!r} has no credentials", cluster=name)
    key = (os.getpid(), f"secret:{connection.secret}")
    with _lock:
        if key in _clients:
            return _clients[key]
    # read outside the lock: the home cluster's call may take its timeout
    config = _kubeconfig_of_secret(connection)
    try:
        made = _configured(lambda configuration: k8s_config.load_kube_config_from_dict(
            config, client_configuration=configuration))
    except (k8s_config.ConfigException, OSError, TypeError, ValueError) as exc:
        # the loader's words name the part that is wrong, never the credentials themselves
        raise _unavailable(f"cluster {name!r}: its Secret's kubeconfig is not usable "
                           f"({type(exc).__name__})", cluster=name) from exc
    with _lock:
        return _clients.setdefault(key, made)


def _kubeconfig_of_secret(connection: ClusterConnection) -> dict[str, Any]:
    """The kubeconfig a Secret of the home cluster holds under `kubeconfig`, parsed."""
    namespace, _, secret_name = connection.secret.rpartition("/")
    secret = Kube().get("Secret", secret_name, namespace or "default")
    encoded = ((secret or {}).get("data") or {}).get("kubeconfig") or ""
    try:
        config = yaml.safe_load(base64.b64decode(encoded, validate=True)) if encoded else None
    except (binascii.Error, ValueError, yaml.YAMLError):
        config = None
    if not isinstance(config, dict):
        raise _unavailable(f"cluster {connection.name!r}: Secret {connection.secret} holds no "
                           "kubeconfig under the key `kubeconfig`", cluster=connection.name)
    return config


def cluster_clients_forget() -> None:
    """Drop this process's clients made from Secrets (an admin changed a cluster's
    credentials: each is read again on its next call; a file's path is a key of its own)."""
    with _lock:
        for key in [k for k in _clients if k[1] and k[1].startswith("secret:")]:
            del _clients[key]


def _translate(exc: Exception, cluster: str | None = None) -> KubeError:
    if isinstance(exc, ApiException):
        try:
            status = json.loads(exc.body) if exc.body else {}
        except ValueError:
            status = {}
        message = status.get("message") or exc.reason or str(exc)
        code = exc.status
        if code == 404:
            return NotFound(message, code=code, status=status)
        if code == 409:
            return Conflict(message, code=code, status=status)
        if code == 410:
            return Expired(message, code=code, status=status)
        if code == 401 or (code == 403 and _AUTHORIZER_REFUSAL.search(message)):
            return NotAuthorized(message, code=code, status=status)
        if code is not None and 400 <= code < 500 and code != 429:
            return KubeRefused(message, code=code, status=status)
        return _unavailable(message, code=code, status=status, cluster=cluster)
    return _unavailable(f"Kubernetes API unreachable: {exc}", cluster=cluster)


# the RBAC authorizer's words, for a resource ('jobs.batch is forbidden: User "…" cannot create
# resource …') and for a path ('forbidden: User "…" cannot get path "/apis/…"', discovery);
# admission's refusals read "is forbidden: exceeded quota: …" or "is forbidden: violates
# PodSecurity …"
_AUTHORIZER_REFUSAL = re.compile(r'(?:^|is )forbidden: User "[^"]*" cannot ')


def _unavailable(message: str, *, cluster: str | None = None, **kwargs: Any) -> KubeUnavailable:
    """Every "the cluster did not answer" passes here, so that the pages can say so (the home
    cluster's banner, another cluster's state)."""
    cluster_status.record_unreachable(message, home_cluster(cluster))
    return KubeUnavailable(message, **kwargs)


class Kube:
    """CRUD over the kinds the portal manages, with a count of the writes it made. One may be
    used from several threads at once (a launch's objects are created together): its
    ApiClient's connection pool is thread-safe, and the count is kept under a lock."""

    def __init__(self, client: k8s.ApiClient | None = None, *,
                 cluster: str | None = None) -> None:
        self._client = client
        # None: the home cluster; the name of another (its client from the clusters' registry)
        self.cluster = home_cluster(cluster)
        self._writes_lock = threading.Lock()
        self.writes = 0

    def _wrote(self) -> None:
        with self._writes_lock:
            self.writes += 1

    @property
    def client(self) -> k8s.ApiClient:
        if self._client is None:
            self._client = cluster_client(self.cluster)
        return self._client

    def _request(self, method: str, path: str, params: dict[str, str] | None = None, *,
                 query: dict[str, Any] | None = None, body: Any = None,
                 content_type: str = "application/json", accept: str = "application/json",
                 timeout: tuple[float, float] = TIMEOUT) -> urllib3.BaseHTTPResponse:
        """One request through the ApiClient; the answer unread (a watch streams it), raised
        as a KubeError unless it is a success."""
        headers = {"Accept": accept}
        if body is not None:
            headers["Content-Type"] = content_type
        try:
            request = self.client.param_serialize(
                method, path, path_params=params,
                query_params=[(k, v) for k, v in (query or {}).items() if v not in (None, "")],
                header_params=headers, body=body, auth_settings=["BearerToken"])
            response = self.client.call_api(*request, _request_timeout=timeout)
            if not 200 <= response.status <= 299:
                response.read()
                raise ApiException.from_response(http_resp=response, body=None, data=None)
        except (ApiException, urllib3.exceptions.HTTPError, OSError) as exc:
            raise _translate(exc, self.cluster) from exc
        cluster_status.record_reachable(self.cluster)
        raw: urllib3.BaseHTTPResponse = response.response
        return raw

    def _call(self, kind: str, method: str, namespace: str | None, name: str | None = None,
              body: Any = None, **query: Any) -> dict[str, Any]:
        """A request on a kind's collection (no name) or one object; its JSON answer."""
        spec = KINDS[kind]
        if spec.namespaced and namespace is None and not (method == "GET" and name is None):
            raise ValueError(f"a {kind} is namespaced: name its namespace")
        content_type = "application/json"
        if method == "PATCH":
            content_type = ("application/merge-patch+json" if spec.custom
                            else "application/strategic-merge-patch+json")
        path, params = spec.path(namespace, name)
        data = self._request(method, path, params, query=query, body=body,
                             content_type=content_type).data
        return json.loads(data) if data else {}

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        try:
            return self._call(kind, "GET", namespace, name)
        except NotFound:
            return None

    def list(self, kind: str, namespace: str | None = None, *, label_selector: str | None = None,
             field_selector: str | None = None) -> dict[str, Any]:
        """One LIST; a namespaced kind without a namespace is listed across all of them."""
        return self._call(kind, "GET", namespace, labelSelector=label_selector,
                          fieldSelector=field_selector)

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        result = self._call(obj["kind"], "POST", obj["metadata"].get("namespace"), body=obj)
        self._wrote()
        return result

    def replace(self, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj["metadata"]
        result = self._call(obj["kind"], "PUT", meta.get("namespace"), meta["name"], obj)
        self._wrote()
        return result

    def patch(self, kind: str, name: str, patch: dict[str, Any],
              namespace: str | None = None) -> dict[str, Any]:
        """A strategic merge patch of a built-in kind (lists of named items merge by name), a
        JSON merge patch of a custom resource."""
        result = self._call(kind, "PATCH", namespace, name, patch)
        self._wrote()
        return result

    def pod_log(self, name: str, namespace: str, *, container: str | None = None,
                tail_lines: int | None = None) -> str:
        path, params = KINDS["Pod"].path(namespace, name, "log")
        # asked for as JSON, as the client's own call asks: the real API server refuses a log
        # asked for as text/plain only, and answers JSON's ask with the text
        response = self._request("GET", path, params,
                                 query={"container": container, "tailLines": tail_lines or None})
        return response.data.decode("utf-8", "replace")

    @property
    def server(self) -> str:
        """The API server's base URL, as the kubeconfig (or the in-cluster config) names it."""
        return str(self.client.configuration.host).rstrip("/")

    def ca_pem(self) -> bytes | None:
        """The certificate authority the client verifies the API server with (PEM); None where
        it verifies with the system's store or not at all."""
        configuration = self.client.configuration
        if not configuration.verify_ssl or not configuration.ssl_ca_cert:
            return None
        return Path(configuration.ssl_ca_cert).read_bytes()

    def service_account_token(self, namespace: str, name: str, *, seconds: int) -> str:
        """A token of ServiceAccount `namespace/name` from the TokenRequest API, valid
        `seconds` (the API server may shorten it)."""
        path, params = KINDS["ServiceAccount"].path(namespace, name, "token")
        request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                   "spec": {"audiences": [], "expirationSeconds": seconds}}
        answer = json.loads(self._request("POST", path, params, body=request).data or b"{}")
        self._wrote()
        token = (answer.get("status") or {}).get("token")
        if not token:
            raise KubeError(f"no token for {namespace}/{name} in the API server's answer")
        return str(token)

    def server_get(self, path: str, *, timeout: float = 5.0) -> bytes:
        """GET a non-resource path of the API server (such as /metrics), with the client's
        credentials and TLS settings; raises as the other calls do."""
        response = self._request("GET", path, accept="text/plain, */*",
                                 timeout=(min(TIMEOUT[0], timeout), timeout))
        return bytes(response.data)

    def delete(self, kind: str, name: str, namespace: str | None = None, *,
               propagation: str = "Background") -> bool:
        """Delete; False when it was already gone."""
        try:
            self._call(kind, "DELETE", namespace, name, {"propagationPolicy": propagation})
        except NotFound:
            return False
        self._wrote()
        return True

    def watch(self, kind: str, namespace: str | None = None, *,
              label_selector: str | None = None, field_selector: str | None = None,
              resource_version: str | None = None, timeout_seconds: int = 60,
              bookmarks: bool = True,
              opened: Callable[[Callable[[], None]], None] | None = None,
              ) -> Iterator[tuple[str, dict[str, Any]]]:
        """One watch request: yields (type, object) — ADDED, MODIFIED, DELETED, BOOKMARK — until
        the server ends the stream after `timeout_seconds`.

        From a resourceVersion only the changes after it come; without one the server first
        sends an ADDED for every current object. A resourceVersion too old for the server's
        history raises `Expired` (an ERROR event with code 410, or a 410 answer), so the caller
        relists. Other failures raise as the other calls do. `opened`, given, is called with a
        function that ends the stream from another thread (the reader then sees it break off).
        """
        path, params = KINDS[kind].path(namespace)
        response = self._request(
            "GET", path, params, timeout=(TIMEOUT[0], timeout_seconds + WATCH_READ_SLACK),
            query={"watch": True, "allowWatchBookmarks": bookmarks,
                   "timeoutSeconds": int(timeout_seconds), "labelSelector": label_selector,
                   "fieldSelector": field_selector, "resourceVersion": resource_version})
        if opened is not None:
            opened(response.shutdown)
        try:
            for line in _stream_lines(response):
                event = json.loads(line)
                event_type, obj = event.get("type", ""), event.get("object") or {}
                if event_type == "ERROR":
                    raise _watch_error(obj)
                yield event_type, obj
        except (urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
            raise _unavailable(f"watch of {kind} broke off: {exc}",
                               cluster=self.cluster) from exc
        finally:
            # a stream left early (the caller stopped reading) is closed, not returned to the
            # pool half-read
            response.close()
            response.release_conn()


def _stream_lines(response: Any) -> Iterator[bytes]:
    """The lines of a chunked watch response as they arrive (an event may span chunks)."""
    pending = b""
    for chunk in response.stream(amt=None, decode_content=False):
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            if line.strip():
                yield line
    if pending.strip():
        yield pending


def _watch_error(status: dict[str, Any]) -> KubeError:
    """The exception for a watch's ERROR event (a Status object)."""
    code = status.get("code")
    message = status.get("message") or status.get("reason") or "watch error"
    if code == 410 or status.get("reason") in ("Expired", "Gone"):
        return Expired(message, code=410, status=status)
    if isinstance(code, int) and 400 <= code < 500 and code != 429:
        return KubeRefused(message, code=code, status=status)
    return KubeUnavailable(message, code=code, status=status)


def cluster_probe(cluster: str | None = None) -> cluster_status.ClusterOutage | None:
    """Ask the cluster (default: the home one) once (an authenticated GET) and record the
    answer; raises nothing."""
    name = home_cluster(cluster)
    try:
        Kube(cluster=name).get("Namespace", "default")  # a missing namespace is an answer too
    except KubeUnavailable as exc:
        cluster_status.record_unreachable(str(exc), name)
        return cluster_status.cluster_outage(name) or cluster_status.ClusterOutage(
            error=str(exc), since=timezone.now())
    cluster_status.record_reachable(name, force=True)
    return None
