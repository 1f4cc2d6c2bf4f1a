"""A workload's Kubernetes objects: its spec from the database row, created and deleted.

Idempotent under deterministic names: creating what already exists (409) adopts it when it
carries this workload's id, so a retried or duplicated task never creates twice.

A launch's objects are created in two steps, the objects of each step at once: a launch waits
on the API server's answers, so it takes two round trips instead of one per object, and a
burst of launches is not held up by each one's requests in turn. First what the pods need or
are guarded by (`FIRST_KINDS`, and the claims of the volumes they mount), then the rest: what makes the
pods and what gives them their address. Each object is created or adopted alone, so the order
within a step changes nothing a retried task finds.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from django.conf import settings

from access.ssh import ca_public_key, host_key_for, report_base_url, report_token_for
from access.ssh_server import SSHServerSpec, ssh_port_beside
from clusters.models import home_cluster_name
from credentials.manifests import SecretUse
from kube import multikueue
from kube.client import Conflict, Kube, KubeRefused
from kube.kueue import queueing_on
from kube.labels import HOME_CLAIM_NAME, LABEL_WORKLOAD_ID
from storage.manifests import make_dataset_claim, make_dataset_volume, make_volume_claim
from storage.services import claim_spec
from tenants.kueue import queue_labels

from .access import workload_access, workload_proxy
from .launch_spec import launch_spec_of
from .manifests import (
    BATCH,
    CHECKPOINT_MOUNT_PATH,
    GpuClaim,
    PodMount,
    WorkloadSpec,
    workload_objects,
)
from .models import Workload, objects_cluster
from .mounts import dataset_claim_spec

log = logging.getLogger(__name__)

# a group's own objects (a JobSet's Jobs, Service and pods; an MPIJob's launcher, workers,
# keys and hostfile) go with it: they are owned by it
DELETE_ORDER = ("JobSet", "MPIJob", "Deployment", "Job", "Ingress", "Service",
                "NetworkPolicy", "Secret")
# created (and answered) before the objects that make pods: the Secret their environment and
# keys come from (a pod started without it waits for the kubelet's next try), an MPI group's
# NetworkPolicy (no pod of the group is ever reachable from the rest of the namespace), a DRA
# type's ResourceClaimTemplate (a pod whose template is missing is not scheduled)
FIRST_KINDS = frozenset({"Secret", "NetworkPolicy", "ResourceClaimTemplate"})

T = TypeVar("T")


def workload_kube(workload: Workload) -> Kube:
    """The client of the cluster that holds the workload's objects (objects_cluster: a
    service's own cluster, the home one for batch work, dispatched from there by MultiKueue,
    which removes the worker's copy): where they are made, stopped and deleted."""
    return Kube(cluster=objects_cluster(workload.kind, workload.cluster))


def workload_spec(workload: Workload, *, queued: bool = False) -> WorkloadSpec:
    """The workload's objects' spec; `queued`: in its tenant's Kueue queue (tenants/kueue.py).
    What it runs comes from its launch spec, frozen at admission (launch_spec.py), never from
    its template or GPU type as they are now; secrets from where they are kept."""
    spec = launch_spec_of(workload)
    token_env = spec["token_env"]
    secret_env: tuple[tuple[str, str], ...] = ()
    if token_env and workload.access_token:
        secret_env = ((token_env, workload.access_token),)
    # a service's proxy and its credentials; None for a batch workload, and for a service
    # launched before proxies existed (it has no OAuth client): that one keeps running as it was
    proxy, proxy_secrets = workload_proxy(workload, token_env=token_env) or (None, {})
    ssh, ssh_secrets = _ssh_server(workload, spec)
    if ssh is not None and proxy is not None:
        proxy = dataclasses.replace(proxy, ssh_port=ssh.port)
    kind = spec["kind"]
    max_runtime = spec["max_runtime_minutes"] * 60 if spec["max_runtime_minutes"] else None
    return WorkloadSpec(
        workload_id=workload.pk,
        name=workload.object_name,
        namespace=workload.tenant.namespace,
        project_id=workload.tenant.keystone_project_id,
        owner=workload.owner.name or workload.owner.username,
        owner_id=workload.owner.keystone_user_id or str(workload.owner.pk),
        template=spec["template"],
        kind=kind,
        image=spec["image"],
        command=tuple(spec["command"]),
        args=tuple(spec["args"]),
        # an S3 dataset's variables after the launch's own (validation keeps them apart)
        env=tuple((name, value) for name, value in spec["env"]) + tuple(
            (name, value) for mount in spec.get("mounts") or () for name, value in
            mount.get("env") or ()),
        secret_env=secret_env,
        secret_data=tuple(sorted({**proxy_secrets, **ssh_secrets}.items())),
        port=spec["port"],
        gpu_resource=spec["gpu_resource"],
        gpu_count=spec["gpu_count"],
        gpu_claim=GpuClaim(**spec["gpu_claim"]) if spec.get("gpu_claim") else None,
        nodes=spec.get("nodes", 1),
        engine=spec.get("engine", ""),
        node_selector=tuple(sorted(spec["node_selector"].items())),
        avoid_nodes=tuple(spec.get("avoid_nodes") or ()),
        cpu=str(spec["cpu"]),
        memory=f"{spec['memory_gb']}Gi",
        max_runtime_seconds=max_runtime if kind == "batch" else None,
        run_as_non_root=spec["run_as_non_root"],
        run_as_user=spec["run_as_user"],
        lb_address_pool=settings.PORTAL_LB_ADDRESS_POOL or None,
        # frozen at admission: a service stays reached the way it was launched
        exposure=spec.get("exposure") or "loadbalancer",
        host=spec.get("host") or None,
        ingress_class=settings.PORTAL_INGRESS_CLASS or None,
        home_claim=HOME_CLAIM_NAME if spec["use_home"] else None,
        mounts=tuple(PodMount(claim=mount["claim"], path=mount["path"],
                              read_only=bool(mount.get("read_only")))
                     for mount in spec.get("mounts") or ()),
        checkpoint=_checkpoint_mount(spec.get("checkpoint")),
        backoff_limit=spec["backoff_limit"],
        proxy=proxy,
        ssh=ssh,
        entrypoint=tuple(spec.get("entrypoint") or ()),
        queue_labels=tuple(sorted(queue_labels(kind, dispatched_to(workload)).items()))
        if queued else (),
        managed_by=multikueue.CONTROLLER if queued and dispatched_to(workload) else None,
        secrets=tuple(SecretUse.thawed(value) for value in spec.get("secrets") or ()),
    )


def dispatched_to(workload: Workload) -> str | None:
    """The worker cluster a batch workload is dispatched to through MultiKueue (its objects
    are made in the home cluster), else None."""
    if workload.kind != BATCH or workload.cluster == home_cluster_name():
        return None
    return workload.cluster


def _checkpoint_mount(checkpoint: dict[str, Any] | None) -> PodMount | None:
    """A batch job's checkpoint folder as its pods mount it (the same for a requeued copy)."""
    if not checkpoint:
        return None
    return PodMount(claim=checkpoint["claim"], path=CHECKPOINT_MOUNT_PATH,
                    sub_path=checkpoint["folder"])


def _ssh_server(workload: Workload, spec: dict[str, Any],
                ) -> tuple[SSHServerSpec | None, dict[str, str]]:
    """The SSH server of a workload launched with it, and its keys for the Secret: the portal
    CA's public key, the workload's host key and report token (derived from SECRET_KEY and its
    OAuth client id, so a retried create writes the same Secret)."""
    access = workload_access(workload)
    if not spec.get("ssh") or access is None:
        return None, {}
    client_id = access.client_id
    host_key, _ = host_key_for(client_id)
    values = {"ssh-ca.pub": ca_public_key() + "\n", "ssh-host-key": host_key,
              "ssh-report-token": report_token_for(client_id) + "\n"}
    server = SSHServerSpec(image=settings.PORTAL_SSH_SERVER_IMAGE, workload_id=workload.pk,
                           portal_url=report_base_url(), secret_name=workload.object_name,
                           port=ssh_port_beside(spec["port"]))
    return server, values


def _owned_by(obj: dict[str, Any], workload: Workload) -> bool:
    labels = obj.get("metadata", {}).get("labels") or {}
    return labels.get(LABEL_WORKLOAD_ID) == str(workload.pk)


def mounted_claims(workload: Workload) -> list[list[dict[str, Any]]]:
    """The claims of the volumes the workload mounts (the home volume's too), as their
    volumes make them, and each dataset's volume and claim in its project, as the launch spec
    froze them: a launch creates any not there yet before its pods (409 = there), so its pods
    never wait for a volume's own task. A volume deleted since has none."""
    claims = [[make_volume_claim(claim_spec(mount.volume))]
              for mount in workload.mounts.select_related("volume__tenant", "volume__owner")
              if mount.volume is not None and mount.volume.deleted_at is None]
    datasets = [dataset_claim_spec(mount, workload.tenant)
                for mount in launch_spec_of(workload).get("mounts") or () if "dataset" in mount]
    return claims + [[make_dataset_volume(spec), make_dataset_claim(spec)] for spec in datasets]


class ClaimGoing(Exception):
    """A volume or claim the launch mounts is being deleted on the cluster (a dataset closed to
    the project and opened again before its old copy was gone): adopted, it would vanish under
    the pods. Waited out like an outage; made anew once gone."""


def _claim_ensure(objects: list[dict[str, Any]], kube: Kube) -> str | None:
    """Create a volume's claim (a dataset's volume, then its claim); None when they are there
    already (they outlive every workload: the portal never deletes them with one). Each is
    looked up first: a real API server admits a create through the namespace's ResourceQuota
    before it finds the name taken, so creating a claim that exists in a project at its
    storage quota is refused 403, not answered 409. One being deleted raises ClaimGoing."""
    made = []
    for obj in objects:
        meta = obj["metadata"]
        found = kube.get(obj["kind"], meta["name"], meta.get("namespace"))
        if found is not None:
            if found["metadata"].get("deletionTimestamp"):
                raise ClaimGoing(f"{obj['kind']} {meta['name']} is being deleted")
            continue
        try:
            kube.create(obj)
        except Conflict:
            continue
        made.append(f"{obj['kind']} {obj['metadata']['name']}")
    return ", ".join(made) or None


def workload_objects_create(workload: Workload, kube: Kube | None = None, *,
                            queued: bool | None = None) -> list[str]:
    """Create every object; those already there (and ours) are adopted. Returns what was made,
    in creation order. `queued`: in its tenant's Kueue queue (default: where the cluster
    queues). Two steps, each step's objects at once (the module's docstring says why): a
    failure is raised once every request of its step has been answered, and the next step is
    not begun, so nothing that makes pods exists before what they need."""
    kube = kube or workload_kube(workload)
    if queued is None:
        queued = queueing_on(kube)
    objects = workload_objects(workload_spec(workload, queued=queued))
    first: list[Callable[[], str | None]] = [
        functools.partial(_claim_ensure, claim, kube) for claim in mounted_claims(workload)]
    first += [_creator(obj, workload, kube) for obj in objects if obj["kind"] in FIRST_KINDS]
    rest = [_creator(obj, workload, kube) for obj in objects if obj["kind"] not in FIRST_KINDS]
    return [made for step in (first, rest) for made in at_once(step) if made]


def _creator(obj: dict[str, Any], workload: Workload, kube: Kube) -> Callable[[], str | None]:
    """A call that creates `obj`, or adopts it when it is there and ours (None then)."""
    meta = obj["metadata"]

    def create() -> str | None:
        try:
            kube.create(obj)
        except Conflict as exc:
            live = kube.get(obj["kind"], meta["name"], meta["namespace"])
            if live is None or not _owned_by(live, workload):
                raise KubeRefused(f"{obj['kind']} {meta['name']} exists and belongs to "
                                  "something else", code=409) from exc
            return None
        return f"{obj['kind']} {meta['name']}"

    return create


def at_once(calls: Sequence[Callable[[], T]]) -> list[T]:
    """Run `calls` at the same time (the last in this thread, the others in threads of their
    own: each one mostly waits on the API server) and return their results in order. Returns
    or raises once every call has ended; what is raised is the first failure in order. The
    calls must not touch the database: a thread of its own has its own connection, outside the
    caller's transaction."""
    if len(calls) <= 1:
        return [call() for call in calls]
    with ThreadPoolExecutor(max_workers=len(calls) - 1,
                            thread_name_prefix="workload-objects") as pool:
        futures = [pool.submit(call) for call in calls[:-1]]
        last: Future[T] = Future()
        try:
            last.set_result(calls[-1]())
        except Exception as exc:  # noqa: BLE001 - raised below, once the others have ended
            last.set_exception(exc)
    # the pool's end waited for every call
    for future in (*futures, last):
        if (failure := future.exception()) is not None:
            raise failure
    return [future.result() for future in (*futures, last)]


ADDRESS_KINDS = ("Ingress", "Service")


def _delete_kinds(workload: Workload, kinds: tuple[str, ...], kube: Kube | None) -> int:
    kube = kube or workload_kube(workload)
    namespace = workload.tenant.namespace
    return sum(kube.delete(kind, workload.object_name, namespace) for kind in kinds)


def workload_address_release(workload: Workload, kube: Kube | None = None) -> int:
    """Delete what gives a finished batch job its address (its Service, its Ingress): a job
    reached for SSH gives its load balancer address back when it ends, not at the Job's TTL.
    Returns how many were there."""
    return _delete_kinds(workload, ADDRESS_KINDS, kube)


def workload_objects_delete(workload: Workload, kube: Kube | None = None) -> int:
    """Delete the workload's objects (pods go with their owners, their claims with them). A DRA
    type's ResourceClaimTemplate is asked for only where the launch made one: a cluster without
    resource.k8s.io has no such kind to ask. Returns how many were there."""
    claimed = bool(launch_spec_of(workload).get("gpu_claim"))
    return _delete_kinds(workload, DELETE_ORDER + (("ResourceClaimTemplate",) if claimed
                                                   else ()), kube)
