"""A project's file server, as the portal sees it: made when someone opens a volume's files
(file_server_ensure), found ready again without asking the cluster while it stays the one
wanted, its last use recorded at each request, and stopped once no one used it for
PORTAL_FILES_IDLE_MINUTES (file_servers_stop_idle, the beat's).

Its bearer token is derived from the portal's SECRET_KEY and the namespace: the portal needs to
store nothing to know it, and each project's server trusts only its own.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import hashlib
import hmac
import json
import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.utils import timezone

from kube.client import Conflict, Expired, Kube, KubeError
from tenants.models import Tenant

from .manifests import (
    ANNOTATION_SPEC,
    NAME,
    SELECTOR_TEXT,
    ClaimMount,
    FileServerSpec,
    file_server_objects,
)

log = logging.getLogger(__name__)

# how long a server found ready is taken as ready without asking the cluster again (a request
# that then finds it gone forgets this at once: file_server_forget)
READY_SECONDS = 60
# how often a server's address is looked for in PORTAL_FILES_ADDRESS_FILE while it starts
ADDRESS_POLL_SECONDS = 0.1


class FileServerUnavailable(Exception):
    """The project's file server could not be started (or reached) now: try again later."""


@dataclasses.dataclass(frozen=True)
class FileServer:
    namespace: str
    url: str  # where the portal sends its requests, no trailing slash
    token: str


def token_for(namespace: str) -> str:
    return hmac.new(settings.SECRET_KEY.encode(), b"gpu-portal-files\0" + namespace.encode(),
                    hashlib.sha256).hexdigest()


def address_for(namespace: str) -> str | None:
    """Where the portal reaches the namespace's file server: PORTAL_FILES_URL made from the
    namespace, or the URL the site's address file names for it (PORTAL_FILES_ADDRESS_FILE;
    None while it names none: the server is starting)."""
    if not settings.PORTAL_FILES_ADDRESS_FILE:
        url: str = settings.PORTAL_FILES_URL.format(namespace=namespace)
        return url.rstrip("/")
    try:
        table = json.loads(Path(settings.PORTAL_FILES_ADDRESS_FILE).read_text())
    except (OSError, ValueError):  # not written yet
        return None
    named = table.get(namespace) if isinstance(table, dict) else None
    return named.rstrip("/") if isinstance(named, str) else None


def file_server_spec(tenant: Tenant, claims: Sequence[ClaimMount]) -> FileServerSpec:
    return FileServerSpec(
        namespace=tenant.namespace, project_id=tenant.keystone_project_id,
        claims=tuple(sorted(claims, key=lambda mount: mount.claim)),
        image=settings.PORTAL_FILES_IMAGE, token=token_for(tenant.namespace),
        run_as_user=settings.PORTAL_FILES_RUN_AS_USER,
        max_upload_bytes=settings.PORTAL_FILES_MAX_UPLOAD_BYTES)


def _ready_key(namespace: str) -> str:
    return f"files:ready:{namespace}"


def _used_key(namespace: str) -> str:
    return f"files:used:{namespace}"


def file_server_used(namespace: str) -> None:
    """Someone used the project's file server now (at a request's start and its end: a long
    download keeps it from looking idle)."""
    cache.set(_used_key(namespace), time.time(), timeout=None)


def file_server_forget(namespace: str) -> None:
    """It did not answer: the next request asks the cluster again."""
    cache.delete(_ready_key(namespace))


def file_server_ensure(*, tenant: Tenant, claims: Sequence[ClaimMount],
                       kube: Kube | None = None) -> FileServer:
    """The project's file server, running with these claims mounted: made if it is not there,
    remade if it mounts other claims, awaited (PORTAL_FILES_START_SECONDS) until its pod is
    ready. Raises FileServerUnavailable when it is not ready in time or the cluster refuses."""
    spec = file_server_spec(tenant, claims)
    file_server_used(spec.namespace)
    url = address_for(spec.namespace)
    if url is not None and cache.get(_ready_key(spec.namespace)) == spec.digest():
        # in use: still taken as ready a while (a request that fails to reach it forgets)
        cache.touch(_ready_key(spec.namespace), READY_SECONDS)
        return FileServer(namespace=spec.namespace, url=url, token=spec.token)
    kube = kube or Kube()
    deadline = time.monotonic() + settings.PORTAL_FILES_START_SECONDS
    try:
        _apply(kube, spec)
        _await_ready(kube, spec, deadline)
    except KubeError as exc:
        raise FileServerUnavailable(f"The cluster did not start the file server: {exc}") from exc
    url = url or _await_address(spec.namespace, deadline)
    cache.set(_ready_key(spec.namespace), spec.digest(), timeout=READY_SECONDS)
    return FileServer(namespace=spec.namespace, url=url, token=spec.token)


def _await_address(namespace: str, deadline: float) -> str:
    """The server's address once the site's address file names it (the file is rewritten
    whole by whoever runs the servers: read again until then)."""
    while (url := address_for(namespace)) is None:
        if time.monotonic() >= deadline:
            raise FileServerUnavailable(
                f"The file server did not start within {settings.PORTAL_FILES_START_SECONDS} s.")
        time.sleep(ADDRESS_POLL_SECONDS)
    return url


def _apply(kube: Kube, spec: FileServerSpec) -> None:
    """Create each object; one that is there is replaced where it differs (a Deployment made
    from another spec, a Secret with another token), left alone otherwise."""
    for obj in file_server_objects(spec):
        try:
            kube.create(obj)
            continue
        except Conflict:
            pass
        current = kube.get(obj["kind"], NAME, spec.namespace) or {}
        if obj["kind"] == "Deployment":
            annotations = (current.get("metadata") or {}).get("annotations") or {}
            if annotations.get(ANNOTATION_SPEC) == spec.digest():
                continue
        elif obj["kind"] == "Secret":
            if ((current.get("data") or {}).get("token") or "") == _b64(spec.token):
                continue
        else:
            continue  # the Service depends on nothing that changes
        obj["metadata"]["resourceVersion"] = (current.get("metadata") or {}).get("resourceVersion")
        kube.replace(obj)
        log.info("the file server of %s remade (%s changed)", spec.namespace, obj["kind"])


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _ready(deployment: dict[str, Any], digest: str) -> bool:
    meta, status = deployment.get("metadata") or {}, deployment.get("status") or {}
    return ((meta.get("annotations") or {}).get(ANNOTATION_SPEC) == digest
            and (status.get("observedGeneration") or 0) >= (meta.get("generation") or 0)
            and (status.get("updatedReplicas") or 0) >= 1
            and (status.get("availableReplicas") or 0) >= 1
            and (status.get("replicas") or 0) == (status.get("updatedReplicas") or 0))


def _await_ready(kube: Kube, spec: FileServerSpec, deadline: float) -> None:
    """Watch the Deployment until its one pod of this spec is available."""
    current = kube.get("Deployment", NAME, spec.namespace)
    if current is not None and _ready(current, spec.digest()):
        return
    version = (current or {}).get("metadata", {}).get("resourceVersion")
    while (left := deadline - time.monotonic()) > 0:
        try:
            for _kind, obj in kube.watch("Deployment", spec.namespace,
                                         field_selector=f"metadata.name={NAME}",
                                         resource_version=version, bookmarks=False,
                                         timeout_seconds=max(1, int(left))):
                version = (obj.get("metadata") or {}).get("resourceVersion") or version
                if _ready(obj, spec.digest()):
                    return
        except Expired:
            version = None  # from what is there now
    raise FileServerUnavailable(
        f"The file server did not start within {settings.PORTAL_FILES_START_SECONDS} s.")


def file_servers_stop_idle(*, kube: Kube | None = None, now: float | None = None) -> list[str]:
    """Stop every file server of this portal's tenants that no request used for
    PORTAL_FILES_IDLE_MINUTES (one never used since it was made counts from its making); the
    namespaces whose server was stopped."""
    kube = kube or Kube()
    now = time.time() if now is None else now
    idle = settings.PORTAL_FILES_IDLE_MINUTES * 60
    deployments = kube.list("Deployment", label_selector=SELECTOR_TEXT).get("items") or []
    namespaces = {d["metadata"]["namespace"] for d in deployments}
    ours = set(Tenant.objects.filter(namespace__in=namespaces).values_list("namespace", flat=True))
    stopped = []
    for deployment in deployments:
        meta = deployment["metadata"]
        namespace = meta["namespace"]
        if namespace not in ours or meta.get("deletionTimestamp"):
            continue
        last = cache.get(_used_key(namespace)) or _made_at(meta)
        if now - last < idle:
            continue
        file_server_stop(namespace, kube=kube)
        stopped.append(namespace)
        log.info("the file server of %s stopped: no request for %d minutes", namespace,
                 settings.PORTAL_FILES_IDLE_MINUTES)
    return stopped


def file_server_stop(namespace: str, *, kube: Kube | None = None) -> None:
    """Stop the project's file server now (idle, or a volume going away: a claim its pod
    mounts cannot be deleted while the pod lives); the next request starts it again."""
    kube = kube or Kube()
    file_server_forget(namespace)
    for kind in ("Deployment", "Service", "Secret"):
        kube.delete(kind, NAME, namespace)


def _made_at(meta: dict[str, Any]) -> float:
    made = meta.get("creationTimestamp")
    if isinstance(made, dt.datetime):
        return made.timestamp()
    if isinstance(made, str):
        return dt.datetime.fromisoformat(made.replace("Z", "+00:00")).timestamp()
    return timezone.now().timestamp()
