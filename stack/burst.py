"""A script's burst against a running demo, as a newcomer would send it.

The admin raises vision-lab's quota through the API; then, with a Keystone token the portal has
never seen, a researcher's script sends N one-GPU Jupyter launches at once (and a few batch jobs
beside them), then M parallel GETs of the workload list. Measured and returned as a dict:

- every launch's answer (status and error code) and latency; admitted vs the quota;
- the GETs' statuses and latencies;
- the wall time from the first launch to the last admitted workload running (the portal's
  "Running" event);
- the state lag: from the moment a watch of the cluster (this process's own, beside the
  portal's) sees a pod turn Ready or a Job complete, to the portal's state change (the
  tracker's event for it, stamped when it wrote the state).

Used by tests/demo/test_burst.py and bench/demo_burst_bench.py; the portal is only spoken to
over HTTP, the cluster over the Kubernetes API, Keystone over its API.
"""

from __future__ import annotations

import concurrent.futures
import datetime as dt
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx
from keystoneauth1 import session as ks_session
from keystoneauth1.identity import v3

from .keystone import ADMIN_PASSWORD

PROJECT = "vision-lab"
USER, PASSWORD = "researcher", "researcher-demo-pass"
WORKLOAD_LABEL = "gpu-portal.io/workload-id"
MANAGED = "app.kubernetes.io/managed-by=gpu-portal"
TIMEOUT = 120.0


def keystone_token(keystone_url: str, user: str, password: str, project: str) -> str:
    """A fresh project-scoped token (POST /v3/auth/tokens), as a script gets one."""
    auth = v3.Password(auth_url=keystone_url, username=user, password=password,
                       user_domain_id="default", project_name=project,
                       project_domain_id="default")
    token = auth.get_access(ks_session.Session(auth=auth)).auth_token
    if token is None:
        raise RuntimeError(f"Keystone issued {user} no token for {project}")
    return token


def percentile(values: list[float], p: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered) + 0.5) - 1))]


def summary(values: list[float]) -> dict[str, Any]:
    return {"n": len(values), "p50": percentile(values, 50), "p95": percentile(values, 95),
            "max": max(values) if values else None,
            "mean": statistics.fmean(values) if values else None}


class ClusterWatch:
    """Watches the portal's pods and Jobs in one namespace and notes, on this machine's wall
    clock, when each workload's pod first turned Ready and its Job first completed."""

    def __init__(self, kubeconfig: Path, namespace: str) -> None:
        from kubernetes import client, config, watch

        self.api = client.CoreV1Api(config.new_client_from_config(config_file=str(kubeconfig)))
        self.batch = client.BatchV1Api(self.api.api_client)
        self.namespace = namespace
        self.ready: dict[int, float] = {}
        self.completed: dict[int, float] = {}
        self._stop = threading.Event()
        self._watch = watch
        self._threads = [threading.Thread(target=self._run, args=(kind,), daemon=True)
                         for kind in ("pods", "jobs")]

    def start(self) -> ClusterWatch:
        for thread in self._threads:
            thread.start()
        return self

    def _run(self, kind: str) -> None:
        lister = (self.api.list_namespaced_pod if kind == "pods"
                  else self.batch.list_namespaced_job)
        version = None
        while not self._stop.is_set():
            try:
                for event in self._watch.Watch().stream(
                        lister, self.namespace, label_selector=MANAGED, timeout_seconds=5,
                        resource_version=version, deserialize=False):
                    seen = time.time()
                    obj = event["object"]
                    version = obj["metadata"]["resourceVersion"]
                    wid = int((obj["metadata"].get("labels") or {}).get(WORKLOAD_LABEL, "0") or 0)
                    if not wid:
                        continue
                    conditions = (obj.get("status") or {}).get("conditions") or []
                    wanted = "Ready" if kind == "pods" else "Complete"
                    if any(c["type"] == wanted and c["status"] == "True" for c in conditions):
                        (self.ready if kind == "pods" else self.completed).setdefault(wid, seen)
            except Exception:  # noqa: BLE001 - a watch that ends or expires: open another
                version = None
                time.sleep(0.1)

    def stop(self) -> None:
        self._stop.set()


# the hops of a launch, in the order a pod passes them; a pod that Kueue does not gate has no
# Workload and is "ungated" when it is made
HOPS = ("deployment", "replicaset", "pod", "workload", "reserved", "admitted", "ungated",
        "scheduled", "address", "ready")
KUEUE_GATE = "kueue.x-k8s.io/admission"
WORKLOAD_HOPS = {"QuotaReserved": "reserved", "Admitted": "admitted"}  # a Workload's conditions


class Hops:
    """When each launch first reached each of `HOPS`, from the objects a watch saw and the wall
    time it saw them. A launch is keyed by its workload id label, or by its pod's name where it
    has none (KubeSpawner's); a Kueue Workload counts for the launch of the pod that owns it."""

    def __init__(self) -> None:
        self._at: dict[str, dict[str, float]] = {}
        self._pod_key: dict[str, str] = {}  # a pod's name → its launch's key
        self._workloads: dict[str, dict[str, float]] = {}  # by the pod that owns it
        self._lock = threading.Lock()

    def seen(self, kind: str, obj: dict[str, Any], at: float) -> None:
        """`kind`: deployments, replicasets, pods or workloads."""
        meta = obj["metadata"]
        with self._lock:
            if kind == "workloads":
                owner = next((o["name"] for o in meta.get("ownerReferences") or []
                              if o["kind"] == "Pod"), None)
                if owner is not None:
                    hops = self._workloads.setdefault(owner, {})
                    hops.setdefault("workload", at)
                    for condition in (obj.get("status") or {}).get("conditions") or []:
                        if condition["status"] == "True" and condition["type"] in WORKLOAD_HOPS:
                            hops.setdefault(WORKLOAD_HOPS[condition["type"]], at)
                return
            key = (meta.get("labels") or {}).get(WORKLOAD_LABEL) or meta["name"]
            hops = self._at.setdefault(key, {})
            if kind != "pods":
                hops.setdefault(kind.removesuffix("s"), at)
                return
            self._pod_key[meta["name"]] = key
            spec, status = obj.get("spec") or {}, obj.get("status") or {}
            reached = {
                "pod": True,
                "ungated": not any(gate["name"] == KUEUE_GATE
                                   for gate in spec.get("schedulingGates") or []),
                "scheduled": bool(spec.get("nodeName")),
                "address": bool(status.get("podIP")),
                "ready": any(c["type"] == "Ready" and c["status"] == "True"
                             for c in status.get("conditions") or []),
            }
            for hop, passed in reached.items():
                if passed:
                    hops.setdefault(hop, at)

    def by_launch(self) -> dict[str, dict[str, float]]:
        """Per launch, when it reached each hop it passed."""
        with self._lock:
            merged = {key: dict(hops) for key, hops in self._at.items()}
            for pod, hops in self._workloads.items():
                if pod in self._pod_key:
                    for hop, at in hops.items():
                        merged[self._pod_key[pod]].setdefault(hop, at)
        return merged


class HopWatch:
    """Watches one namespace's Deployments, ReplicaSets, pods and Kueue Workloads and notes in
    `hops` (Hops) when each launch reached each hop, on this machine's wall clock: a watch event
    comes within milliseconds, where Kubernetes' own timestamps are to the second. Events are
    read as plain JSON (ClusterWatch's too): decoded into the client's typed models, they had
    the bench's process use 0.8-1.0 CPU-s per burst of 12 (0.3 s now), on the two cores the
    timed launches share."""

    def __init__(self, kubeconfig: Path, namespace: str) -> None:
        from kubernetes import client, config

        api = config.new_client_from_config(config_file=str(kubeconfig))
        core, apps, custom = (client.CoreV1Api(api), client.AppsV1Api(api),
                              client.CustomObjectsApi(api))
        self.namespace = namespace
        self.hops = Hops()
        self._stop = threading.Event()
        listers: dict[str, Callable[..., Any]] = {
            "deployments": apps.list_namespaced_deployment,
            "replicasets": apps.list_namespaced_replica_set,
            "pods": core.list_namespaced_pod,
            "workloads": lambda namespace, **kw: custom.list_namespaced_custom_object(
                "kueue.x-k8s.io", "v1beta2", namespace, "workloads", **kw)}
        self._threads = [threading.Thread(target=self._run, args=(kind, lister), daemon=True)
                         for kind, lister in listers.items()]

    def start(self) -> HopWatch:
        for thread in self._threads:
            thread.start()
        return self

    def _run(self, kind: str, lister: Callable[..., Any]) -> None:
        from kubernetes import watch

        version = None
        while not self._stop.is_set():
            try:
                for event in watch.Watch().stream(lister, self.namespace, timeout_seconds=5,
                                                  resource_version=version, deserialize=False):
                    at = time.time()
                    obj = event["object"]
                    version = obj["metadata"]["resourceVersion"]
                    if event["type"] != "DELETED":
                        self.hops.seen(kind, obj, at)
            except Exception:  # noqa: BLE001 - a watch that ends or expires: open another
                version = None
                time.sleep(0.1)

    def stop(self) -> None:
        self._stop.set()


def hop_spread(hops: dict[str, dict[str, float]], since: float) -> dict[str, list[float]]:
    """Per hop that every launch passed: first, median and last, in seconds after `since`."""
    spread = {}
    for hop in HOPS:
        times = sorted(h[hop] - since for h in hops.values() if hop in h)
        if times and len(times) == len(hops):
            spread[hop] = [times[0], statistics.median(times), times[-1]]
    return spread


class Portal:
    """The portal's REST API with one token."""

    def __init__(self, url: str, token: str, *, connections: int = 256) -> None:
        self.http = httpx.Client(base_url=f"{url}/api/v1", timeout=TIMEOUT,
                                 headers={"X-Auth-Token": token},
                                 limits=httpx.Limits(max_connections=connections,
                                                     max_keepalive_connections=connections))

    def timed(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        started = time.monotonic()
        try:
            response = self.http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            return {"status": None, "code": type(exc).__name__, "seconds":
                    time.monotonic() - started, "body": None}
        body: Any = None
        if response.headers.get("content-type", "").startswith("application/json"):
            body = response.json()
        code = body.get("code") if isinstance(body, dict) else None
        return {"status": response.status_code, "code": code, "body": body,
                "seconds": time.monotonic() - started}

    def close(self) -> None:
        self.http.close()


def all_at_once(calls: Sequence[Callable[[], dict[str, Any]]], workers: int
                ) -> list[dict[str, Any]]:
    """Run every call in its own thread, released together by a barrier."""
    barrier = threading.Barrier(len(calls))

    def run(call: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        barrier.wait(timeout=60)
        return call()

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(workers, len(calls))) as pool:
        return list(pool.map(run, calls))


def prepare_quota(url: str, keystone_url: str, kubeconfig: Path, *, a100: int, v100: int
                  ) -> dict[str, Any]:
    """As the admin: vision-lab's quota raised to `a100` A100s (and `v100` V100s), through the
    API; then wait for its namespace's ResourceQuota to follow (the reconcile task)."""
    from kubernetes import client, config

    admin = Portal(url, keystone_token(keystone_url, "admin", ADMIN_PASSWORD, "admin"))
    try:
        tenants = admin.timed("GET", "/tenants/", params={"name": PROJECT})["body"]
        tenant: dict[str, Any] = next(t for t in tenants["results"] if t["name"] == PROJECT)
        answer = admin.timed("PATCH", f"/tenants/{tenant['id']}/quota/", json={
            "gpus_total": a100 + v100, "gpus_by_type": {"a100": a100, "v100": v100, "t4": 0},
            "cpu": 8 * (a100 + v100), "memory": 32 * (a100 + v100),
            "max_workloads": 4 * (a100 + v100)})
        if answer["status"] != 200:
            raise RuntimeError(f"quota update answered {answer['status']}: {answer['body']}")
    finally:
        admin.close()
    core = client.CoreV1Api(config.new_client_from_config(config_file=str(kubeconfig)))
    deadline = time.monotonic() + TIMEOUT
    while True:
        quotas = core.list_namespaced_resource_quota(tenant["namespace"]).items
        hard = {k: v for q in quotas for k, v in ((q.spec.hard if q.spec else None) or {}).items()}
        if hard.get("requests.nvidia.com/gpu") == str(a100 + v100):
            return tenant
        # a queued namespace's GPUs are its Kueue ClusterQueue's (the caller waits for that)
        if "requests.nvidia.com/gpu" not in hard and hard.get("pods") == str(
                2 * 4 * (a100 + v100)):
            return tenant
        if time.monotonic() > deadline:
            raise RuntimeError(f"{tenant['namespace']}'s ResourceQuota did not follow: {hard}")
        time.sleep(0.2)


def _running_events(portal: Portal, ids: list[int], states: tuple[str, ...]
                    ) -> dict[int, float]:
    """Per workload, the wall time of the portal's event that recorded it in `states`."""
    found: dict[int, float] = {}
    for wid in ids:
        body = portal.timed("GET", f"/workloads/{wid}/events/")["body"] or {}
        events = body.get("results", body) if isinstance(body, dict) else body
        for event in events or []:
            if event["source"] == "tracker" and event["reason"].lower() in states:
                found[wid] = dt.datetime.fromisoformat(event["at"]).timestamp()
                break
    return found


def run_burst(url: str, keystone_url: str, kubeconfig: Path, *, launches: int = 50,
              quota: int = 12, batch: int = 4, gets: int = 200,
              log: Callable[[str], object] = print) -> dict[str, Any]:
    tenant = prepare_quota(url, keystone_url, kubeconfig, a100=quota, v100=batch)
    watch = ClusterWatch(kubeconfig, tenant["namespace"]).start()
    token = keystone_token(keystone_url, USER, PASSWORD, PROJECT)  # never shown to the portal
    portal = Portal(url, token)
    jupyter = {"template": "jupyter", "gpu_type": "a100", "gpu_count": 1}
    job = {"template": "custom", "kind": "batch", "image": "busybox:1.36",
           "command": ["sleep", "5"], "gpu_type": "v100", "gpu_count": 1}
    calls = ([lambda i=i: portal.timed("POST", "/workloads/", json={**jupyter,
                                                                      "name": f"burst {i}"})
              for i in range(launches)]
             + [lambda i=i: portal.timed("POST", "/workloads/", json={**job, "name": f"job {i}"})
                for i in range(batch)])
    try:
        log(f"burst: {launches} Jupyter launches (quota {quota} A100) and {batch} batch jobs "
            "at once, with a fresh token")
        started_wall, started = time.time(), time.monotonic()
        answers = all_at_once(calls, len(calls))
        answered = time.monotonic() - started
        notebooks, jobs = answers[:launches], answers[launches:]
        admitted = [a["body"]["id"] for a in notebooks if a["status"] == 201]
        job_ids = [a["body"]["id"] for a in jobs if a["status"] == 201]
        log(f"  answered in {answered:.2f} s: " + ", ".join(
            f"{n}× {s}" for s, n in sorted(_tally(answers).items())))

        log(f"{gets} parallel GETs of workloads/")
        listed = all_at_once([lambda: portal.timed("GET", "/workloads/")] * gets, gets)

        # every admitted notebook running, every job succeeded (the portal's own state)
        deadline = time.monotonic() + TIMEOUT
        while True:
            states = _states(portal, admitted + job_ids)
            settled = all(states.get(w) == "running" for w in admitted) and all(
                states.get(w) in ("succeeded", "failed") for w in job_ids)
            if settled or time.monotonic() > deadline:
                break
            time.sleep(0.25)
        running_at = _running_events(portal, admitted, ("running",))
        finished_at = _running_events(portal, job_ids, ("succeeded", "failed"))
        gpus_in_pods = _gpus_in_running_pods(watch, "a100")
    finally:
        watch.stop()
        portal.close()
    lags = [running_at[w] - watch.ready[w] for w in admitted
            if w in running_at and w in watch.ready]
    lags += [finished_at[w] - watch.completed[w] for w in job_ids
             if w in finished_at and w in watch.completed]
    to_running = (max(running_at.values()) - started_wall
                  if running_at and len(running_at) == len(admitted) else None)
    return {
        "launches": launches, "quota": quota, "batch": batch, "gets": gets,
        "namespace": tenant["namespace"],
        "answers": _tally(answers), "launch_answers": _tally(notebooks),
        "job_answers": _tally(jobs),
        "launch_seconds": summary([a["seconds"] for a in answers]),
        "answered_seconds": answered,
        "admitted": len(admitted), "admitted_ids": admitted, "job_ids": job_ids,
        "get_answers": _tally(listed), "get_seconds": summary([a["seconds"] for a in listed]),
        "states": states, "all_running": all(states.get(w) == "running" for w in admitted),
        "a100_gpus_in_running_pods": gpus_in_pods,
        "jobs_succeeded": all(states.get(w) == "succeeded" for w in job_ids),
        "seconds_to_all_running": to_running,
        "state_lag_seconds": summary(lags),
        "lags_measured": len(lags), "changes_expected": len(admitted) + len(job_ids),
    }


def _gpus_in_running_pods(watch: ClusterWatch, gputype: str) -> int:
    """GPUs that the namespace's running pods on `gputype` nodes request: what the cluster
    gave, to hold beside the quota."""
    total = 0
    for pod in watch.api.list_namespaced_pod(watch.namespace, label_selector=MANAGED).items:
        if pod.status is None or pod.spec is None or pod.status.phase != "Running" \
                or (pod.spec.node_selector or {}).get("gputype") != gputype:
            continue
        for container in pod.spec.containers:
            requests = (container.resources.requests or {}) if container.resources else {}
            total += int(requests.get("nvidia.com/gpu", 0))
    return total


def _tally(answers: list[dict[str, Any]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for a in answers:
        key = f"{a['status']}" + (f" {a['code']}" if a["code"] and a["status"] != 201 else "")
        counts[key] = counts.get(key, 0) + 1
    return counts


def _states(portal: Portal, ids: list[int]) -> dict[int, str]:
    wanted, states = set(ids), {}
    page: str | None = "/workloads/?page_size=200"
    while page:
        body = portal.timed("GET", page)["body"] or {}
        for w in body.get("results", []):
            if w["id"] in wanted:
                states[w["id"]] = w["state"]
        following = body.get("next")
        page = following.split("/api/v1", 1)[1] if following else None
    return states


LOST_CYCLE_SIGNS = ("Traceback", "OperationalError", "database is locked",
                    "the database is unavailable", "tracker lease lost", "raised unexpected")


def tracker_log_report(text: str) -> dict[str, Any]:
    """What the tracker's log says: its periodic reports (every 15 s while it leads), and every
    line that marks lost work (a traceback, a database error, a lost lease)."""
    lines = text.splitlines()
    return {"reports": sum("tracking: {" in line for line in lines),
            "lost": [line for line in lines if any(s in line for s in LOST_CYCLE_SIGNS)]}


def locked_lines(logs: dict[str, str]) -> dict[str, int]:
    """Per process log, how many lines say "database is locked"."""
    return {name: text.count("database is locked") for name, text in logs.items()
            if "database is locked" in text}
