#!/usr/bin/env python
"""Distributed training on the real control plane: two-node groups gang-admitted by Kueue, through
the portal and straight to Kueue in the same run.

    .venv/bin/python bench/distributed_bench.py [--jobs 20] [--tenants 5] [--json out.json]

The real control plane (stack/k8s/cluster.py) with 16 A100 nodes of 8 GPUs (KWOK), JobSet, the
MPI operator and Kueue (stack/k8s/addons.py: waitForPodsReady on), the portal on PostgreSQL.
Every tenant holds an equal share of the 128 A100s as nominal quota (rounded down) and may borrow
without limit. Each job is a `pytorch-ddp` group of two nodes × 8 A100s (a whole node per rank),
running a seeded 4-10 s, in a seeded order over the tenants: 8 groups fit at once, so most wait
in their queue and start as others end.

First **Kueue alone**: the same groups (tenants, run times, order) created back to back as the
portal's own JobSet manifest (workloads/manifests.py make_jobset, without the portal's labels)
in the tenant's queue, by the administrator's kubeconfig. Then **the portal**: the same groups
launched through the portal's own launch (admission, the create task) with the tracker running.
A watcher process (the same for both sides) stamps, per group, its JobSet created, each pod
scheduled and running, and its JobSet completed. It reports for both sides:

- **launch → all ranks running**: per group, from its submission to the moment its last rank's
  pod was running (p50, p95), and the ratio portal / Kueue alone (the goal: ≤ 1.1);
- **drain**: from the first submission to the last group completed, and its ratio;
- **partial starts**: groups that ever had a rank running while another rank of theirs could
  not be scheduled (Unschedulable): gang admission means 0; and Kueue's evictions by reason
  (Preempted: a lender reclaimed its quota from a borrowing group, which is requeued whole;
  PodsReadyTimeout: not every rank ready in time);
- the portal's lag from the last rank running to the workload shown `running` (p50, p95).
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import sys
import time
import uuid
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.queueing_bench import (  # noqa: E402
    WatcherProcess,
    follow_all,
    stamp_writer,
    with_portal_on_kueue,
)

NODES, GPUS_PER_NODE, RANKS, RANK_GPUS = 16, 8, 2, 8
JOBSET_LABEL = "jobset.sigs.k8s.io/jobset-name"


def inventory(path: Path) -> Path:
    """16 A100 nodes of 8 GPUs and two CPU-only nodes, in kubesim's inventory format."""
    path.write_text(yaml.safe_dump({"nodePools": [
        {"name": "a100", "count": NODES, "namePrefix": "gpu-a100-", "labels": {"gputype": "a100"},
         "cpu": 128, "memory": "1Ti", "gpu": {"model": "A100-SXM4-80GB", "count": GPUS_PER_NODE},
         "taints": ["nvidia.com/gpu:NoSchedule"]},
        {"name": "cpu", "count": 2, "namePrefix": "cpu-", "cpu": 32, "memory": "128Gi"}],
        "addressPools": [{"name": "default", "addresses": ["192.168.1.240-192.168.1.250"]}]}))
    return path


def start_cluster(workdir: Path):
    from stack.k8s.cluster import ControlPlane
    from stack.k8s.jobset import JobSet
    from stack.k8s.kueue import Kueue
    from stack.k8s.mpi_operator import MPIOperator

    cp = ControlPlane(workdir / "kube", inventory=inventory(workdir / "inventory.yaml"),
                      addons=[JobSet(), MPIOperator(), Kueue()], pod_start_seconds=0.5)
    began = time.perf_counter()
    cp.start()
    print(f"control plane with JobSet, the MPI operator and Kueue started in "
          f"{time.perf_counter() - began:.1f} s", flush=True)
    return cp


class GroupClock(WatcherProcess):
    """Per group (namespace, JobSet name), the monotonic time a watcher process first saw:
    `created`, `completed`, `running:<pod>` per pod, `evicted` (Kueue's), and `partial` when a
    rank ran while another could not be scheduled. One line per stamp in a file."""

    def stamps(self) -> dict[tuple[str, str], dict]:
        groups: dict[tuple[str, str], dict] = {}
        for line in self.path.read_text().splitlines():
            namespace, name, step, at = line.split()
            group = groups.setdefault((namespace, name), {"running": {}, "evictions": [],
                                                          "partial": False})
            if step.startswith("running:"):
                group["running"].setdefault(step.split(":", 1)[1], float(at))
            elif step.startswith("evicted@"):
                group["evictions"].append(step.split("@")[1])
            elif step == "partial":
                group["partial"] = True
            else:
                group.setdefault(step, float(at))
        return groups


def watch_groups(kubeconfig: str, path: str) -> None:
    """The watcher process of GroupClock: JobSets, pods and Kueue Workloads, every namespace."""
    from kubernetes import client, config

    api = config.new_client_from_config(config_file=kubeconfig)
    stamp = stamp_writer(path)
    pods: dict[tuple[str, str], dict[str, str]] = {}  # group → pod → running|unschedulable|…

    def see(kind: str, obj: dict, now: float, deleted: bool = False) -> None:
        meta = obj["metadata"]
        namespace = meta.get("namespace", "")
        status = obj.get("status") or {}
        conditions = {c["type"]: c["status"] for c in status.get("conditions") or ()}
        if kind == "jobsets":
            stamp(namespace, meta["name"], "created", now)
            if conditions.get("Completed") == "True" or conditions.get("Failed") == "True":
                stamp(namespace, meta["name"], "completed", now)
        elif kind == "pods":
            group = (meta.get("labels") or {}).get(JOBSET_LABEL)
            if not group:
                return
            key = (namespace, group)
            phase = status.get("phase")
            scheduled = [c for c in status.get("conditions") or () if c["type"] == "PodScheduled"]
            if deleted or phase in ("Succeeded", "Failed"):
                pods.get(key, {}).pop(meta["name"], None)
                return
            if phase == "Running":
                state = "running"
                stamp(namespace, group, f"running:{meta['name']}", now)
            elif scheduled and scheduled[0].get("reason") == "Unschedulable":
                state = "unschedulable"
            else:
                state = "waiting"
            mine = pods.setdefault(key, {})
            mine[meta["name"]] = state
            if "running" in mine.values() and "unschedulable" in mine.values():
                stamp(namespace, group, "partial", now)
        else:
            owners = [o["name"] for o in meta.get("ownerReferences") or ()
                      if o["kind"] == "JobSet"]
            evicted = [c for c in status.get("conditions") or ()
                       if c["type"] == "Evicted" and c["status"] == "True"]
            if owners and evicted:  # one line per eviction, its reason with it
                stamp(namespace, owners[0], f"evicted@{evicted[0].get('reason', '')}@"
                                            + evicted[0]["lastTransitionTime"], now)

    custom = client.CustomObjectsApi(api)
    listers = {
        "jobsets": lambda **kw: custom.list_cluster_custom_object(
            "jobset.x-k8s.io", "v1alpha2", "jobsets", **kw),
        "pods": client.CoreV1Api(api).list_pod_for_all_namespaces,
        "workloads": lambda **kw: custom.list_cluster_custom_object(
            "kueue.x-k8s.io", "v1beta2", "workloads", **kw)}

    follow_all(listers, see)


GroupClock.target = staticmethod(watch_groups)


def group_spec(*, name: str, namespace: str, seconds: int, workload_id: int = 0, **extra):
    from tenants.kueue import queue_labels
    from workloads.manifests import JOBSET, WorkloadSpec

    return WorkloadSpec(
        workload_id=workload_id, name=name, namespace=namespace, project_id="bench",
        owner="bench", owner_id="bench", template="pytorch-ddp", kind="batch",
        image="nvcr.io/nvidia/pytorch:24.10-py3", command=("python", "train.py"),
        env=(("KUBESIM_RUN_SECONDS", str(seconds)),), node_selector=(("gputype", "a100"),),
        gpu_count=RANK_GPUS, nodes=RANKS, engine=JOBSET, cpu="4", memory="16Gi",
        run_as_user=1000, queue_labels=tuple(sorted(queue_labels("batch").items())), **extra)


def straight_jobset(*, name: str, namespace: str, seconds: int) -> dict:
    """A group as one submits it straight to Kueue: the portal's JobSet manifest in the
    tenant's queue, without the portal's labels."""
    from tenants.kueue import queue_labels
    from workloads.manifests import make_jobset

    jobset = make_jobset(group_spec(name=name, namespace=namespace, seconds=seconds))
    jobset["metadata"]["labels"] = queue_labels("batch")
    return jobset


def wait_completed(clock: GroupClock, keys: list[tuple[str, str]], timeout: float,
                   what: str) -> dict:
    began = time.monotonic()
    while True:
        stamps = clock.stamps()
        if all("completed" in stamps.get(k, {}) for k in keys):
            return stamps
        if time.monotonic() - began > timeout:
            raise SystemExit(f"{what}: the groups did not all complete in time")
        time.sleep(0.3)


def kueue_alone(plan, clock: GroupClock, kubeconfig: Path, timeout: float, *,
                prefix: str) -> dict:
    from kubernetes import client, config

    custom = client.CustomObjectsApi(config.new_client_from_config(config_file=str(kubeconfig)))
    groups = []
    began = time.monotonic()
    for n, (tenant, seconds) in enumerate(plan):
        jobset = straight_jobset(name=f"{prefix}-{n}", namespace=tenant.namespace,
                                 seconds=seconds)
        submitted = time.monotonic()
        custom.create_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", tenant.namespace,
                                               "jobsets", jobset)
        groups.append({"key": (tenant.namespace, jobset["metadata"]["name"]),
                       "submitted": submitted, "seconds": seconds})
    stamps = wait_completed(clock, [g["key"] for g in groups], timeout, prefix)
    for group in groups:
        group.update(stamps[group["key"]])
    print(f"{prefix}: {len(plan)} groups drained in "
          f"{max(g['completed'] for g in groups) - began:.1f} s", flush=True)
    return {"began": began, "groups": groups}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[int(q * (len(ordered) - 1))], 2)


def summary(side: dict) -> dict:
    """Launch → all ranks running (p50, p95), drain, partial starts and evictions."""
    starts = [max(g["running"].values()) - g["submitted"] for g in side["groups"]
              if len(g["running"]) >= RANKS]
    return {
        "groups": len(side["groups"]),
        "all_ranks_running": len(starts),
        "launch_to_all_ranks_running_seconds": {"p50": percentile(starts, 0.5),
                                                "p95": percentile(starts, 0.95)},
        "drain_seconds": round(max(g["completed"] for g in side["groups"]) - side["began"], 1),
        "partial_starts": sum(g["partial"] for g in side["groups"]),
        # by reason: Preempted (a lender took its quota back: fair sharing), PodsReadyTimeout
        # (not every rank ready in time: waitForPodsReady)
        "evictions": dict(collections.Counter(
            reason for g in side["groups"] for reason in g["evictions"])),
    }


def run(args, admin_kubeconfig: Path) -> dict:
    from catalogue.models import GpuType, Template
    from identity.models import User
    from tenants.provisioning import tenant_reconcile
    from tenants.services import quota_update, tenant_ensure
    from workloads.models import Workload
    from workloads.services import workload_launch
    from workloads.tasks import workload_create_task
    from workloads.tracking.tracker import Tracker

    rng = random.Random(25)
    a100 = GpuType.objects.create(slug="a100", name="NVIDIA A100",
                                  node_selector={"gputype": "a100"})
    owner = User.objects.create(username="bench")
    share = NODES * GPUS_PER_NODE // args.tenants
    tenants = []
    for i in range(args.tenants):
        tenant = tenant_ensure(keystone_project_id=uuid.uuid4().hex, name=f"team-{i:02d}")
        quota_update(tenant=tenant, acting_user=None, changes={
            "gpus_total": NODES * GPUS_PER_NODE, "max_workloads": args.jobs, "cpu": 1024,
            "memory_gb": 4096, "gpus_by_type": {"a100": share}})
        tenant_reconcile(tenant_id=tenant.pk)
        tenants.append(tenant)
    template = Template.objects.get(slug="pytorch-ddp")
    plan = [(rng.choice(tenants), rng.randint(4, 10)) for _ in range(args.jobs)]
    clock = GroupClock(admin_kubeconfig, args.workdir / "stamps.txt").start()
    # the cluster's first groups pay its warming up: one per tenant, drained before either side
    kueue_alone([(t, 1) for t in tenants], clock, admin_kubeconfig, args.timeout,
                prefix="warmup")
    alone = kueue_alone(plan, clock, admin_kubeconfig, args.timeout, prefix="straight")
    tracker = Tracker()
    tracker.run_for(0.5)
    began = time.monotonic()
    portal: dict[int, dict] = {}
    for n, (tenant, seconds) in enumerate(plan):
        submitted = time.monotonic()
        workload, _ = workload_launch(tenant=tenant, user=owner, request={
            "template": template, "name": f"group-{n}", "kind": "batch", "gpu_type": a100,
            "gpu_count": RANK_GPUS, "nodes": RANKS, "image": template.image,
            "command": ["python", "train.py"], "cpu": 4, "memory": 16,
            "env": {"KUBESIM_RUN_SECONDS": str(seconds)}})
        workload_create_task(workload.pk)
        workload.refresh_from_db(fields=["object_name"])
        portal[workload.pk] = {"key": (tenant.namespace, workload.object_name),
                               "submitted": submitted, "seconds": seconds}
    while Workload.objects.exclude(state__in=Workload.FINAL_STATES).exists():
        tracker.run_for(1.0)
        if time.monotonic() - began > args.timeout:
            raise SystemExit("portal: the groups did not all finish in time")
    stamps = wait_completed(clock, [g["key"] for g in portal.values()], args.timeout, "portal")
    clock.stop()
    offset = time.time() - time.monotonic()
    lags = []
    for pk, group in portal.items():
        group.update(stamps[group["key"]])
        workload = Workload.objects.get(pk=pk)
        running = workload.events.filter(reason="Running").order_by("at").first()
        if running is not None and len(group["running"]) >= RANKS:
            lags.append(running.at.timestamp() - offset - max(group["running"].values()))
    sides = {"kueue_alone": summary(alone),
             "portal": summary({"began": began, "groups": list(portal.values())})}
    states = {s: Workload.objects.filter(state=s).count() for s in Workload.FINAL_STATES}
    p50 = {side: figures["launch_to_all_ranks_running_seconds"]["p50"]
           for side, figures in sides.items()}
    return {
        "jobs": args.jobs, "tenants": args.tenants, "nodes": NODES,
        "gpus_per_node": GPUS_PER_NODE, "group": f"{RANKS} nodes × {RANK_GPUS} A100",
        **sides, "states": states,
        "ratio_p50_portal_to_kueue_alone": round(p50["portal"] / p50["kueue_alone"], 2)
        if p50["kueue_alone"] else None,
        "ratio_drain_portal_to_kueue_alone": round(
            sides["portal"]["drain_seconds"] / sides["kueue_alone"]["drain_seconds"], 2),
        "portal_running_lag_seconds": {"p50": percentile(lags, 0.5),
                                       "p95": percentile(lags, 0.95)} if lags else None,
        "load_average": round(os.getloadavg()[0], 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20)
    parser.add_argument("--tenants", type=int, default=5)
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    with_portal_on_kueue(args, prefix="distributed-bench-", start_cluster=start_cluster,
                         run=run)


if __name__ == "__main__":
    main()
