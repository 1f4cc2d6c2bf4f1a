"""Several real control planes behind one portal: a manager and its MultiKueue workers.

The manager is a ControlPlane (stack/k8s/cluster.py) whose Kueue runs as a MultiKueue manager
(`default_addons(kueue=True, multikueue=MultiKueueSettings(...))`). A worker is another
ControlPlane on its own ports and folder, with its own KWOK nodes (the worker `east`:
deploy/kubesim/east-inventory.yaml, 2 × 8 H100) and what MultiKueue needs there: Kueue (the
dispatched copies are admitted by the worker's own queues), JobSet and the MPI operator (the
kinds dispatched besides Jobs), and MetalLB's controller with the inventory's address pool: the
services the portal places there get their addresses from it. No GPU agents or volumes: each
process costs the machine's cores.

`register_workers(manager, {"east": worker})` joins them the way an operator does
(docs/multicluster.md): on each worker the manager's least-privilege identity
(kube/multikueue.py make_worker_identity) and a token for it from the TokenRequest API; on the
manager a Secret with that kubeconfig, a MultiKueueCluster per worker, the MultiKueueConfig and
the AdmissionCheck. The tenants' ClusterQueues then carry the check
(kube/multikueue.py with_admission_check).

    python -m stack.k8s.multikueue --workdir /tmp/multi   # manager + east until Ctrl-C
"""

from __future__ import annotations

import functools
import shutil
import signal
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

from kube import multikueue as manifests

from ..procs import REPO, StackError, wait_for
from . import build
from .cluster import PORTAL_TOKEN_SECONDS, Addon, ControlPlane
from .jobset import JobSet
from .kueue import DEFAULT_PODS_READY_TIMEOUT, Kueue
from .metallb import MetalLB
from .mpi_operator import MPIOperator

EAST = "east"
EAST_INVENTORY = REPO / "deploy" / "kubesim" / "east-inventory.yaml"
# the portal's own cluster (PORTAL_CLUSTER_NAME's default)
MANAGER = "main"


def worker_addons(*, inventory: Path = EAST_INVENTORY,
                  pods_ready_timeout: float = DEFAULT_PODS_READY_TIMEOUT) -> list[Addon]:
    """What a worker runs beside its control plane: MetalLB's controller (the addresses of the
    services placed there, from the inventory's pools), JobSet and the MPI operator before
    Kueue (whose JobSet and MPIJob integrations need their CRDs served when it starts)."""
    return [MetalLB(inventory), JobSet(), MPIOperator(),
            Kueue(pods_ready_timeout=pods_ready_timeout)]


def worker(workdir: Path, *, inventory: Path = EAST_INVENTORY, port: int = 0,
           pods_ready_timeout: float = DEFAULT_PODS_READY_TIMEOUT,
           pod_start_seconds: float = 0.5, default_run_seconds: float = 5.0,
           etcd_in_memory: bool = True) -> ControlPlane:
    """A worker control plane, not started (`.start()`)."""
    return ControlPlane(workdir, inventory=inventory, port=port,
                        addons=worker_addons(inventory=inventory,
                                             pods_ready_timeout=pods_ready_timeout),
                        pod_start_seconds=pod_start_seconds,
                        default_run_seconds=default_run_seconds, etcd_in_memory=etcd_in_memory)


def start_together(*cps: ControlPlane) -> None:
    """Start control planes at once, each in a thread (their processes' start-up overlaps: a
    pair is ready in little more than the slower one's time); if one fails, all are stopped
    and its error raised."""
    from concurrent.futures import ThreadPoolExecutor

    # what both need, built first (a fresh cache's build is some 20 minutes: not twice at once)
    build.ensure("kubernetes", "etcd", "kwok", "kueue", "jobset", "mpi-operator", "metallb",
                 quiet=False)
    with ThreadPoolExecutor(max_workers=len(cps), thread_name_prefix="control-plane") as pool:
        futures = [pool.submit(cp.start) for cp in cps]
        errors = [exc for future in futures if (exc := future.exception()) is not None]
    if errors:
        for cp in cps:
            cp.stop()
        raise errors[0]


def worker_kubeconfig(cp: ControlPlane, name: str) -> str:
    """The kubeconfig the manager's Kueue uses for worker `cp`: its API server on loopback,
    its CA inline, the token of the manager's ServiceAccount there (made, with its ClusterRole,
    if missing)."""
    with cp.api_client() as api:
        for doc in manifests.make_worker_identity():
            build.apply_object(api, doc)
        token = build.service_account_token(api, manifests.WORKER_NAMESPACE,
                                            manifests.WORKER_SERVICE_ACCOUNT,
                                            PORTAL_TOKEN_SECONDS)
    return manifests.make_kubeconfig(cluster=name, server=cp.url, ca_pem=cp.ca.pem, token=token)


def register_workers(manager: ControlPlane, workers: Mapping[str, ControlPlane], *,
                     timeout: float = 60) -> None:
    """Make `workers` the manager's MultiKueue clusters and wait until its Kueue has connected
    to each (their MultiKueueCluster Active) and the admission check is Active."""
    kubeconfigs = [(name, worker_kubeconfig(cp, name)) for name, cp in workers.items()]
    with manager.api_client() as api:
        for doc in manifests.make_manager_objects(kubeconfigs):
            build.apply_object(api, doc)
    for name in workers:
        wait_for(functools.partial(cluster_active, manager, name), timeout=timeout,
                 what=f"MultiKueueCluster {name} Active", interval=0.3)
    for check in [manifests.ADMISSION_CHECK, *map(manifests.check_name, workers)]:
        wait_for(functools.partial(_active, manager, "admissionchecks", check),
                 timeout=timeout, what=f"the MultiKueue admission check {check} Active",
                 interval=0.3)


def cluster_active(manager: ControlPlane, name: str) -> bool:
    """Whether the manager's Kueue is connected to worker `name` (its MultiKueueCluster's
    condition Active)."""
    return _active(manager, "multikueueclusters", name)


def _active(cp: ControlPlane, plural: str, name: str) -> bool:
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    with cp.api_client() as api:
        try:
            obj = cast(dict[str, Any], client.CustomObjectsApi(api).get_cluster_custom_object(
                "kueue.x-k8s.io", "v1beta2", plural, name))
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Active" and c["status"] == "True" for c in conditions)


def write_cluster_kubeconfigs(root: Path, clusters: Mapping[str, ControlPlane]) -> dict[str, Path]:
    """Each cluster's admin kubeconfig at root/<name>/kubeconfig (`.demo/clusters/`)."""
    paths = {}
    for name, cp in clusters.items():
        path = root / name / "kubeconfig"
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(cp.admin_kubeconfig, path)
        path.chmod(0o600)
        paths[name] = path
    return paths


def main(argv: list[str]) -> int:
    import argparse

    from .addons import default_addons
    from .kueue import MultiKueueSettings

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/gpu-portal-multikueue"))
    args = parser.parse_args(argv)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    manager = ControlPlane(args.workdir / MANAGER, inventory=None,
                           addons=default_addons(kueue=True, multikueue=MultiKueueSettings()))
    east = worker(args.workdir / EAST)
    try:
        start_together(manager, east)
        register_workers(manager, {EAST: east})
    except StackError as exc:
        east.stop()
        manager.stop()
        print(f"stack.k8s.multikueue: {exc}", file=sys.stderr)
        return 1
    paths = write_cluster_kubeconfigs(args.workdir / "clusters", {MANAGER: manager, EAST: east})
    print("\n".join(f"{name}: kubectl --kubeconfig {path}" for name, path in paths.items()),
          flush=True)
    try:
        signal.sigwait({signal.SIGINT, signal.SIGTERM})
    finally:
        east.stop()
        manager.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
