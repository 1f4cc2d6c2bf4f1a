"""The simulated kubelet of every node: moves bound pods through their lifecycle.

Per pod it keeps a small in-memory record (`PodRun`) with one `ContainerRun` per container:
which stage it is in and when the next transition is due. `reconcile` applies the transitions
that are due, writes the pod status derived from the record (the real kubelet's status shapes)
and asks its queue to come back at the next due time. Pod IPs come from the node's podCIDR;
GPU devices are allocated at admission, like the kubelet's device manager does.

Timing: `container_create_delay` (ContainerCreating → Running) and `ready_delay` (→ Ready)
come from the config; image-pull and crash back-offs are the kubelet's 10 s doubling to 5 min,
scaled by `container_create_delay` (1 s in the demo, so real values; tests use tiny ones).
"""

from __future__ import annotations

import asyncio
import calendar
import hashlib
import ipaddress
import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kubesim import podlogs
from kubesim.errors import bad_request, not_found
from kubesim.resources import Obj, by_kind
from kubesim.scheduler import device_wants, is_terminal
from kubesim.store import clone, now_rfc3339

if TYPE_CHECKING:
    from kubesim.cluster import Cluster

POD = by_kind("Pod")
SECRET = by_kind("Secret")
CONFIGMAP = by_kind("ConfigMap")
COMPONENT = "kubelet"

RUN_SECONDS = "kubesim.io/run-seconds"
EXIT_CODE = "kubesim.io/exit-code"
GPU_TRACE = "kubesim.io/gpu-trace"
# Queue keys other than (namespace, name): "_" never starts a namespace name.
_KILL = "_kill"
_STOPPED = "_stopped"
PULL_ERRORS = ("ErrImagePull", "ImagePullBackOff")

Key = tuple[str, str]


def rfc3339(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


def normalize_image(image: str) -> str:
    """`nginx` → `docker.io/library/nginx:latest`, as container runtimes report it."""
    name = image
    first = name.split("/", 1)[0]
    if "/" not in name:
        name = f"docker.io/library/{name}"
    elif "." not in first and ":" not in first and first != "localhost":
        name = f"docker.io/{name}"
    last = name.rsplit("/", 1)[-1]
    if ":" not in last and "@" not in last:
        name += ":latest"
    return name


def _digest(*parts: object) -> str:
    return hashlib.sha256("/".join(map(str, parts)).encode()).hexdigest()


@dataclass
class ContainerRun:
    name: str
    image: str
    bad_image: bool
    run_seconds: float | None  # None: a service, runs until stopped
    exit_code: int
    restarts_on: str  # "Always", "OnFailure", "Never"
    stage: str = "creating"  # creating, pull-error, pull-backoff, running, crash-backoff, exited
    due: float = 0.0  # loop time of the next transition
    ready_at: float | None = None
    ends_at: float | None = None
    started_wall: float | None = None
    finished_wall: float | None = None
    ready: bool = False
    restart_count: int = 0
    pull_failures: int = 0
    last_terminated: Obj | None = None
    previous: tuple[float, float, int] | None = None  # last run: started, finished, exit code


@dataclass
class PodRun:
    uid: str
    node: str
    ip: str
    admitted_wall: float
    containers: dict[str, ContainerRun] = field(default_factory=dict)
    done: bool = False


def _float(value: Any, default: float | None) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return default


def _int(value: Any, default: int) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


class NodeNet:
    """Pod IPs of one node: the lowest free host address of its podCIDR."""

    def __init__(self, cidr: str):
        self.network = ipaddress.ip_network(cidr, strict=False)
        self.used: set[int] = set()

    def allocate(self) -> str:
        size = self.network.num_addresses
        for offset in range(2, size - 1):  # .0 network, .1 the bridge, last broadcast
            if offset not in self.used:
                self.used.add(offset)
                return str(self.network.network_address + offset)
        return str(self.network.network_address + 2)  # exhausted: share rather than fail

    def claim(self, ip: str) -> None:
        try:
            self.used.add(int(ipaddress.ip_address(ip)) - int(self.network.network_address))
        except ValueError:
            pass

    def release(self, ip: str) -> None:
        try:
            self.used.discard(int(ipaddress.ip_address(ip)) - int(self.network.network_address))
        except ValueError:
            pass


class Kubelet:
    def __init__(self, cluster: Cluster):
        self.cluster = cluster
        self.config = cluster.config
        self.scale = max(0.01, cluster.config.container_create_delay)
        self.bad_image = re.compile(cluster.config.bad_image_pattern)
        self.nodes: dict[str, NodeNet] = {}
        self.node_ips: dict[str, str] = {}
        self.images: dict[str, set[str]] = {}  # node -> images present
        self.runs: dict[Key, PodRun] = {}
        self.followers: dict[Key, set[asyncio.Event]] = {}  # wakes `follow_log` streams
        self.stopping: set[Key] = set()  # pods in graceful deletion
        self.queue = cluster.make_queue("kubelet", self.reconcile)
        minor = cluster.inventory.kubelet_version.lstrip("v").split(".")
        self.created_fmt = ("Created container: {}" if len(minor) > 1 and minor[1].isdigit()
                            and int(minor[1]) >= 32 else "Created container {}")

    def close(self) -> None:
        for events in self.followers.values():
            for event in events:
                event.set()

    # ------------------------------------------------------------------ listener side

    def on_node(self, event: str, node: Obj) -> None:
        name = node["metadata"]["name"]
        if event == "DELETED":
            self.nodes.pop(name, None)
            return
        if name not in self.nodes:
            cidr = (node.get("spec") or {}).get("podCIDR") or "10.244.0.0/24"
            self.nodes[name] = NodeNet(cidr)
        for addr in (node.get("status") or {}).get("addresses") or ():
            if addr.get("type") == "InternalIP":
                self.node_ips[name] = addr.get("address", "")

    def on_pod(self, event: str, pod: Obj) -> None:
        meta = pod["metadata"]
        key = (meta["namespace"], meta["name"])
        run = self.runs.get(key)
        if event == "DELETED" or (run is not None and run.uid != meta["uid"]):
            self._forget(key, pod if event == "DELETED" else None)
            run = None
        if event != "DELETED":
            if is_terminal(pod):
                self._release(key)
            if meta.get("deletionTimestamp"):
                if run is not None and not run.done and key not in self.stopping:
                    # Graceful deletion: stop the containers, then report them stopped,
                    # which removes the pod (the store deletes a marked object on update).
                    self.stopping.add(key)
                    self.queue.add(self._kill_key(key, meta["uid"]))
                    grace = meta.get("deletionGracePeriodSeconds") or 0
                    self.queue.add_after((_STOPPED, key, meta["uid"]), min(float(grace), self.scale))
                elif run is None and (pod.get("spec") or {}).get("nodeName") and \
                        not is_terminal(pod) and key not in self.stopping:
                    # kubesim was restarted while its containers were stopping: nothing runs
                    # it here any more, so its end is reported now (which removes it)
                    self.stopping.add(key)
                    self.queue.add((_STOPPED, key, meta["uid"]))
            elif (pod.get("spec") or {}).get("nodeName"):
                self.queue.add(key)
        for waiter in self.followers.get(key, ()):
            waiter.set()

    def _forget(self, key: Key, deleted: Obj | None) -> None:
        kill = self._kill_key(key, deleted["metadata"]["uid"]) if deleted is not None else None
        run = self.runs.pop(key, None)
        graceful = key in self.stopping
        self.stopping.discard(key)
        self._release(key)
        if run is not None:
            net = self.nodes.get(run.node)
            if net is not None:
                net.release(run.ip)
            if deleted is not None and not run.done and not graceful:
                self.queue.add(kill)

    def _release(self, key: Key) -> None:
        if self.cluster.gpus.release(*key):
            self.cluster.metrics.changed()

    # ------------------------------------------------------------------ worker side

    def reconcile(self, key: Any) -> None:
        if key[0] == _KILL:
            self._kill_events(key[1], key[2], key[3])
            return
        if key[0] == _STOPPED:
            self._stopped(key[1], key[2])
            return
        pod = self.cluster.peek(POD, *key)
        if pod is None:
            return
        node = (pod.get("spec") or {}).get("nodeName")
        if not node or node not in self.nodes or pod["metadata"].get("deletionTimestamp"):
            return
        run = self.runs.get(key)
        if run is None:
            if is_terminal(pod):
                return
            run = self._admit(pod, node)
            if run is None:
                return
        if run.done:
            return
        now = self.cluster.now()
        for c in run.containers.values():
            while c.due <= now and self._step(pod, run, c, now):
                pass
        self._write(pod, run)
        due = [c.due for c in run.containers.values() if c.due != float("inf")]
        if due and not run.done:
            self.queue.add_after(key, max(0.0, min(due) - now))

    def graceful_deletion(self, rt: Any, pod: Obj, grace: int | None) -> int | None:
        """Store deletion hook: a pod whose containers run here is deleted gracefully."""
        if rt is not POD or (grace is not None and grace <= 0):
            return None
        meta = pod["metadata"]
        run = self.runs.get((meta.get("namespace", ""), meta["name"]))
        if run is None or run.done or run.uid != meta.get("uid"):
            return None
        if grace is None:
            grace = int((pod.get("spec") or {}).get("terminationGracePeriodSeconds", 30))
        return grace

    def _kill_key(self, key: Key, uid: str) -> tuple[str, Key, str, tuple[str, ...]]:
        run = self.runs.get(key)
        names = tuple(c.name for c in run.containers.values() if c.started_wall is not None
                      and c.stage != "exited") if run else ()
        return (_KILL, key, uid, names)

    def _kill_events(self, key: Key, uid: str, names: tuple[str, ...]) -> None:
        involved = {"kind": "Pod", "apiVersion": "v1",
                    "metadata": {"namespace": key[0], "name": key[1], "uid": uid}}
        for name in names:
            self.cluster.record_event(involved, "Normal", "Killing", f"Stopping container {name}",
                                      COMPONENT)

    def _stopped(self, key: Key, uid: str) -> None:
        """The containers of a pod being deleted have exited: report it (which removes it)."""
        pod = self.cluster.peek(POD, *key)
        run = self.runs.get(key)
        if pod is None or pod["metadata"]["uid"] != uid:
            return
        if run is None:
            if key in self.stopping:
                self._stopped_unrun(pod)
            return
        wall = time.time()
        for c in run.containers.values():
            if c.stage == "exited":
                continue
            c.finished_wall = wall
            c.ready = False
            c.last_terminated = {
                "exitCode": 0 if c.started_wall is not None else 137,
                "reason": "Completed" if c.started_wall is not None else "ContainerStatusUnknown",
                "startedAt": rfc3339(c.started_wall or wall),
                "finishedAt": rfc3339(wall),
                "containerID": self._container_id(run, c),
            }
            c.exit_code = c.last_terminated["exitCode"]
            c.stage = "exited"
            c.due = float("inf")
        # Terminated container states always change the status, so this write happens and,
        # the pod being marked for deletion, removes it (unless finalizers hold it).
        self._write(pod, run)

    def _stopped_unrun(self, pod: Obj) -> None:
        """A pod being deleted that no container of this kubelet runs (marked before a
        restart): its containers reported gone, as a kubelet reports what it lost track of."""
        wall = rfc3339(time.time())
        status = clone(pod.get("status") or {})
        known = {cs.get("name"): cs for cs in status.get("containerStatuses") or ()}
        statuses = []
        for container in (pod.get("spec") or {}).get("containers") or ():
            previous = known.get(container["name"]) or {}
            running = (previous.get("state") or {}).get("running") or {}
            statuses.append({
                **previous, "name": container["name"], "image": container.get("image", ""),
                "imageID": previous.get("imageID", ""), "ready": False, "started": False,
                "restartCount": previous.get("restartCount", 0),
                "state": {"terminated": {"exitCode": 137, "reason": "ContainerStatusUnknown",
                                         "startedAt": running.get("startedAt", wall),
                                         "finishedAt": wall}}})
        status.update(phase="Failed", containerStatuses=statuses)
        self.cluster.write_status(POD, pod, status)

    def _admit(self, pod: Obj, node: str) -> PodRun | None:
        meta = pod["metadata"]
        spec = pod.get("spec") or {}
        key = (meta["namespace"], meta["name"])
        wants = device_wants(pod)
        for resource, per_container in wants.items():
            needed = sum(n for _, n in per_container)
            free = self.cluster.gpus.free_count(node, resource)
            held = len(self.cluster.gpus.by_pod.get(key, ()))
            if needed > free + held:
                self._reject(pod, "UnexpectedAdmissionError",
                             f"Allocate failed due to requested number of devices unavailable "
                             f"for {resource}. Requested: {needed}, Available: {free}, "
                             "which is unexpected")
                return None
        annotations = meta.get("annotations") or {}
        if wants:
            # the annotation, or the same as an env var (what a portal user can set at launch)
            env_trace = next((e.get("value") for c in spec.get("containers") or ()
                              for e in c.get("env") or ()
                              if isinstance(e, dict) and e.get("name") == "KUBESIM_GPU_TRACE"),
                             None)
            trace = annotations.get(GPU_TRACE) or env_trace or "busy"
            self.cluster.gpus.allocate(node, meta["namespace"], meta["name"], wants, trace,
                                       self.cluster.now())
            self.cluster.metrics.changed()
        net = self.nodes[node]
        old_status = pod.get("status") or {}
        ip = old_status.get("podIP") or net.allocate()
        if old_status.get("podIP"):
            net.claim(ip)
        now = self.cluster.now()
        run = PodRun(meta["uid"], node, ip, time.time())
        # After a restart from a state file: containers that were running keep running.
        previous = {cs.get("name"): cs for cs in old_status.get("containerStatuses") or ()}
        policy = spec.get("restartPolicy", "Always")
        for container in spec.get("containers") or ():
            env = {e.get("name"): e.get("value") for e in container.get("env") or ()
                   if isinstance(e, dict)}
            explicit = env.get("KUBESIM_RUN_SECONDS", annotations.get(RUN_SECONDS))
            if policy == "Always" and explicit is None:
                run_seconds = None  # a service: runs until deleted
            else:
                run_seconds = _float(explicit, self.config.default_run_seconds)
            exit_code = _int(env.get("KUBESIM_EXIT_CODE", annotations.get(EXIT_CODE)), 0)
            image = container.get("image", "")
            run.containers[container["name"]] = ContainerRun(
                name=container["name"], image=image,
                bad_image=bool(self.bad_image.search(image)),
                run_seconds=run_seconds, exit_code=exit_code, restarts_on=policy,
                due=now + self.config.container_create_delay,
            )
            c = run.containers[container["name"]]
            started = ((previous.get(c.name) or {}).get("state") or {}).get("running")
            if started and not c.bad_image:
                self._resume(c, previous[c.name], started, now)
                continue
            self._pull_event(pod, node, container)
        self.runs[key] = run
        return run

    def _resume(self, c: ContainerRun, status: Obj, running: Obj, now: float) -> None:
        """Pick a container up where a previous kubesim left it (state file)."""
        started: float
        try:
            started = calendar.timegm(time.strptime(running.get("startedAt", ""),
                                                    "%Y-%m-%dT%H:%M:%SZ"))
        except ValueError:
            started = time.time()
        c.stage = "running"
        c.started_wall = float(started)
        c.restart_count = int(status.get("restartCount") or 0)
        c.ready = bool(status.get("ready"))
        c.ready_at = now if c.ready else now + self.config.ready_delay
        elapsed = max(0.0, time.time() - started)
        c.ends_at = (now + max(0.0, c.run_seconds - elapsed)
                     if c.run_seconds is not None else None)
        c.due = min(c.ready_at if not c.ready else float("inf"),
                    c.ends_at if c.ends_at is not None else float("inf"))

    def _pull_event(self, pod: Obj, node: str, container: Obj) -> bool:
        """Pulling (or 'already present'); True when the image is already on the node."""
        image = container.get("image", "")
        present = image in self.images.get(node, ()) and container.get("imagePullPolicy") != "Always"
        if present:
            self.cluster.record_event(pod, "Normal", "Pulled",
                                      f'Container image "{image}" already present on machine',
                                      COMPONENT)
        else:
            self.cluster.record_event(pod, "Normal", "Pulling", f'Pulling image "{image}"',
                                      COMPONENT)
        return present

    def _reject(self, pod: Obj, reason: str, message: str) -> None:
        status = clone(pod.get("status") or {})
        status.update({"phase": "Failed", "reason": reason, "message": message,
                       "startTime": status.get("startTime") or now_rfc3339()})
        self.cluster.write_status(POD, pod, status)
        self.cluster.record_event(pod, "Warning", reason, message, COMPONENT)

    def _backoff(self, failures: int) -> float:
        doubled: float = 10.0 * 2 ** max(0, failures - 1)
        return min(300.0, doubled) * self.scale

    def _step(self, pod: Obj, run: PodRun, c: ContainerRun, now: float) -> bool:
        """Apply one due transition of a container; False when nothing more is due."""
        image = c.image
        if c.stage == "creating":
            if c.bad_image:
                c.pull_failures += 1
                c.stage = "pull-error"
                c.due = now + self.scale
                ref = normalize_image(image)
                self.cluster.record_event(
                    pod, "Warning", "Failed",
                    f'Failed to pull image "{image}": {self._pull_error(ref)}', COMPONENT)
                self.cluster.record_event(pod, "Warning", "Failed", "Error: ErrImagePull",
                                          COMPONENT)
                return True
            self.images.setdefault(run.node, set()).add(image)
            if c.restart_count == 0:
                size = int(_digest("size", image)[:6], 16) * 97
                took = self.config.container_create_delay
                self.cluster.record_event(
                    pod, "Normal", "Pulled",
                    f'Successfully pulled image "{image}" in {took:.3g}s ({took:.3g}s including '
                    f"waiting). Image size: {size} bytes.", COMPONENT)
            self.cluster.record_event(pod, "Normal", "Created", self.created_fmt.format(c.name),
                                      COMPONENT)
            self.cluster.record_event(pod, "Normal", "Started", f"Started container {c.name}",
                                      COMPONENT)
            c.stage = "running"
            c.started_wall = time.time()
            c.ready = False
            c.ready_at = now + self.config.ready_delay
            c.ends_at = now + c.run_seconds if c.run_seconds is not None else None
            c.due = min(c.ready_at, c.ends_at if c.ends_at is not None else float("inf"))
            return True
        if c.stage == "pull-error":
            c.stage = "pull-backoff"
            c.due = now + self._backoff(c.pull_failures)
            self.cluster.record_event(pod, "Normal", "BackOff", f'Back-off pulling image "{image}"',
                                      COMPONENT)
            self.cluster.record_event(pod, "Warning", "Failed", "Error: ImagePullBackOff",
                                      COMPONENT)
            return True
        if c.stage == "pull-backoff":
            self.cluster.record_event(pod, "Normal", "Pulling", f'Pulling image "{image}"',
                                      COMPONENT)
            c.stage = "creating"
            c.due = now + self.config.container_create_delay
            return True
        if c.stage == "running":
            if c.ends_at is not None and c.ends_at <= now:
                self._exit(pod, run, c, now)
                return True
            if c.ready_at is not None and c.ready_at <= now and not c.ready:
                c.ready = True
            c.due = c.ends_at if c.ends_at is not None else float("inf")
            return c.due <= now
        if c.stage == "crash-backoff":
            c.stage = "creating"
            c.due = now
            self.cluster.record_event(
                pod, "Normal", "Pulled", f'Container image "{image}" already present on machine',
                COMPONENT)
            return True
        c.due = float("inf")  # exited: nothing more happens
        return False

    def _exit(self, pod: Obj, run: PodRun, c: ContainerRun, now: float) -> None:
        c.finished_wall = time.time()
        c.ready = False
        terminated = {
            "exitCode": c.exit_code,
            "reason": "Completed" if c.exit_code == 0 else "Error",
            "startedAt": rfc3339(c.started_wall or c.finished_wall),
            "finishedAt": rfc3339(c.finished_wall),
            "containerID": self._container_id(run, c),
        }
        c.previous = (c.started_wall or c.finished_wall, c.finished_wall, c.exit_code)
        restart = c.restarts_on == "Always" or (c.restarts_on == "OnFailure" and c.exit_code != 0)
        if not restart:
            c.stage = "exited"
            c.last_terminated = terminated
            c.due = float("inf")
            return
        c.restart_count += 1
        c.stage = "crash-backoff"
        c.last_terminated = terminated
        c.due = now + self._backoff(c.restart_count)
        meta = pod["metadata"]
        self.cluster.record_event(
            pod, "Warning", "BackOff",
            f"Back-off restarting failed container {c.name} in pod "
            f"{meta['name']}_{meta['namespace']}({meta['uid']})", COMPONENT)

    def _pull_error(self, ref: str) -> str:
        return (f'rpc error: code = NotFound desc = failed to pull and unpack image "{ref}": '
                f'failed to resolve reference "{ref}": {ref}: not found')

    def _container_id(self, run: PodRun, c: ContainerRun) -> str:
        return "containerd://" + _digest(run.uid, c.name, c.restart_count)

    # ------------------------------------------------------------------ status

    def _container_status(self, pod: Obj, run: PodRun, c: ContainerRun) -> Obj:
        ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        ref = normalize_image(c.image)
        status: dict[str, Any] = {
            "name": c.name,
            "image": ref,
            "imageID": "",
            "ready": c.ready,
            "started": False,
            "restartCount": c.restart_count,
            "lastState": {},
        }
        if c.stage not in ("creating", "pull-error", "pull-backoff") or c.restart_count:
            status["imageID"] = f"{ref.rsplit(':', 1)[0]}@sha256:{_digest('image', c.image)}"
        if c.stage == "creating":
            status["state"] = {"waiting": {"reason": "ContainerCreating"}}
        elif c.stage == "pull-error":
            status["state"] = {"waiting": {"reason": "ErrImagePull", "message": self._pull_error(ref)}}
        elif c.stage == "pull-backoff":
            status["state"] = {"waiting": {"reason": "ImagePullBackOff",
                                           "message": f'Back-off pulling image "{c.image}"'}}
        elif c.stage == "running":
            status["state"] = {"running": {"startedAt": rfc3339(c.started_wall or time.time())}}
            status["started"] = True
            status["containerID"] = self._container_id(run, c)
        elif c.stage == "crash-backoff":
            backoff = int(round(self._backoff(c.restart_count) / self.scale))
            status["state"] = {"waiting": {
                "reason": "CrashLoopBackOff",
                "message": f"back-off {backoff}s restarting failed container={c.name} "
                           f"pod={name}_{ns}({run.uid})"}}
            status["containerID"] = (c.last_terminated or {}).get("containerID", "")
        else:  # exited
            status["state"] = {"terminated": dict(c.last_terminated or {})}
            status["containerID"] = (c.last_terminated or {}).get("containerID", "")
        if c.last_terminated and c.stage != "exited":
            status["lastState"] = {"terminated": dict(c.last_terminated)}
        return status

    def _write(self, pod: Obj, run: PodRun) -> None:
        old = pod.get("status") or {}
        status = clone(old)
        containers = list(run.containers.values())
        statuses = [self._container_status(pod, run, c) for c in containers]
        all_started = all(c.started_wall is not None for c in containers)
        all_exited = all(c.stage == "exited" for c in containers)
        if all_exited and containers:
            failed = any(c.exit_code != 0 for c in containers)
            phase = "Failed" if failed else "Succeeded"
            run.done = True
        elif all_started and containers:
            phase = "Running"
        else:
            phase = "Pending"
        from kubesim.cluster import set_condition

        names = [c.name for c in containers if not c.ready]
        sandbox = any(c.stage != "creating" or c.restart_count for c in containers)
        if phase in ("Succeeded", "Failed"):
            sandbox = False
        set_condition(status, {"type": "PodReadyToStartContainers",
                               "status": "True" if sandbox else "False"})
        set_condition(status, {"type": "Initialized", "status": "True"})
        if names:
            not_ready = {"status": "False", "reason": "PodCompleted" if phase == "Succeeded"
                         else "ContainersNotReady"}
            if phase != "Succeeded":
                not_ready["message"] = f"containers with unready status: [{' '.join(names)}]"
            set_condition(status, {"type": "Ready", **not_ready})
            set_condition(status, {"type": "ContainersReady", **not_ready})
        else:
            set_condition(status, {"type": "Ready", "status": "True"})
            set_condition(status, {"type": "ContainersReady", "status": "True"})
        set_condition(status, {"type": "PodScheduled", "status": "True"})
        order = ["PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady",
                 "PodScheduled"]
        status["conditions"].sort(key=lambda c: order.index(c["type"]) if c["type"] in order else 9)
        host_ip = self.node_ips.get(run.node, "")
        status.update({
            "phase": phase,
            "hostIP": host_ip,
            "hostIPs": [{"ip": host_ip}],
            "podIP": run.ip,
            "podIPs": [{"ip": run.ip}],
            "startTime": old.get("startTime") or rfc3339(run.admitted_wall),
            "containerStatuses": statuses,
        })
        init = (pod.get("spec") or {}).get("initContainers") or []
        if init:
            status["initContainerStatuses"] = [{
                "name": ic.get("name"), "image": normalize_image(ic.get("image", "")),
                "imageID": "", "ready": True, "started": False, "restartCount": 0,
                "state": {"terminated": {"exitCode": 0, "reason": "Completed",
                                         "startedAt": rfc3339(run.admitted_wall),
                                         "finishedAt": rfc3339(run.admitted_wall)}},
                "lastState": {}} for ic in init]
        status.pop("reason", None)
        status.pop("message", None)
        if status != old:
            self.cluster.write_status(POD, pod, status)

    # ------------------------------------------------------------------ logs

    def _log_context(self, pod: Obj, run: PodRun, c: ContainerRun,
                     started: float, exit_code: int) -> podlogs.LogContext:
        meta = pod["metadata"]
        spec_c: dict[str, Any] = next((x for x in (pod.get("spec") or {}).get("containers") or ()
                       if x.get("name") == c.name), {})
        env = self._env(meta["namespace"], spec_c)
        devices = [f"{d.model.model_name} ({d.device_id})"
                   for d in self.cluster.gpus.by_pod.get((meta["namespace"], meta["name"]), ())
                   if d.holder and d.holder.container == c.name]
        return podlogs.LogContext(
            namespace=meta["namespace"], pod=meta["name"], uid=meta["uid"], container=c.name,
            image=c.image, command=list(spec_c.get("command") or []),
            args=list(spec_c.get("args") or []), env=env, gpus=devices, started=started,
            batch=c.run_seconds is not None, run_seconds=c.run_seconds, exit_code=exit_code)

    def _env(self, namespace: str, container: Obj) -> dict[str, str]:
        """Container env with secretKeyRef / configMapKeyRef resolved (Jupyter's token)."""
        import base64

        env: dict[str, str] = {}
        for item in container.get("env") or ():
            if not isinstance(item, dict) or not item.get("name"):
                continue
            if "value" in item:
                env[item["name"]] = str(item.get("value") or "")
                continue
            source = item.get("valueFrom") or {}
            if "secretKeyRef" in source:
                ref = source["secretKeyRef"] or {}
                secret = self.cluster.peek(SECRET, namespace, ref.get("name", ""))
                if secret is not None:
                    if ref.get("key") in (secret.get("stringData") or {}):
                        env[item["name"]] = secret["stringData"][ref["key"]]
                    elif ref.get("key") in (secret.get("data") or {}):
                        try:
                            env[item["name"]] = base64.b64decode(
                                secret["data"][ref["key"]]).decode("utf-8", "replace")
                        except ValueError:
                            pass
            elif "configMapKeyRef" in source:
                ref = source["configMapKeyRef"] or {}
                cm = self.cluster.peek(CONFIGMAP, namespace, ref.get("name", ""))
                if cm is not None and ref.get("key") in (cm.get("data") or {}):
                    env[item["name"]] = cm["data"][ref["key"]]
        return env

    def _log_target(self, namespace: str, name: str, container: str | None,
                    previous: bool) -> tuple[Obj, PodRun | None, ContainerRun | None]:
        pod = self.cluster.peek(POD, namespace, name)
        if pod is None:
            raise not_found(POD, name)
        names = [c.get("name") for c in (pod.get("spec") or {}).get("containers") or ()]
        init_names = [c.get("name") for c in (pod.get("spec") or {}).get("initContainers") or ()]
        if not container:
            if len(names) != 1:
                raise bad_request(f"a container name must be specified for pod {name}, "
                                  f"choose one of: [{' '.join(names)}]")
            container = names[0]
        if container not in names and container not in init_names:
            raise bad_request(f"container {container} is not valid for pod {name}")
        if not (pod.get("spec") or {}).get("nodeName"):
            return pod, None, None  # not scheduled yet: the real server answers nothing
        run = self.runs.get((namespace, name))
        if run is None or run.uid != pod["metadata"]["uid"] or container not in run.containers:
            if is_terminal(pod) or container in init_names:
                return pod, None, None
            raise bad_request(f'container "{container}" in pod "{name}" is waiting to start: '
                              "ContainerCreating")
        c = run.containers[container]
        if previous:
            if c.previous is None:
                raise bad_request(f'previous terminated container "{container}" in pod "{name}" '
                                  "not found")
            return pod, run, c
        if c.started_wall is None or (c.stage in ("creating", "pull-error", "pull-backoff")
                                      and c.previous is None):
            reason = ("trying and failing to pull image" if c.stage in ("pull-error", "pull-backoff")
                      else "ContainerCreating")
            raise bad_request(f'container "{container}" in pod "{name}" is waiting to start: '
                              f"{reason}")
        return pod, run, c

    def _lines(self, pod: Obj, run: PodRun, c: ContainerRun, previous: bool,
               until: float) -> list[podlogs.Line]:
        if previous or c.stage in ("crash-backoff", "creating") and c.previous is not None:
            started, finished, code = c.previous  # type: ignore[misc]
            ctx = self._log_context(pod, run, c, started, code)
            return podlogs.lines_until(ctx, until, finished)
        ctx = self._log_context(pod, run, c, c.started_wall or until, c.exit_code)
        finished = c.finished_wall if c.stage == "exited" else None
        return podlogs.lines_until(ctx, until, finished)

    @staticmethod
    def _format(lines: list[podlogs.Line], tail_lines: int | None, timestamps: bool) -> list[str]:
        if tail_lines is not None:
            lines = lines[-tail_lines:] if tail_lines > 0 else []
        if timestamps:
            return [f"{podlogs.rfc3339_nano(ts)} {text}" for ts, text in lines]
        return [text for _, text in lines]

    def pod_log(self, namespace: str, name: str, container: str | None, *,
                tail_lines: int | None = None, timestamps: bool = False,
                previous: bool = False) -> list[str]:
        pod, run, c = self._log_target(namespace, name, container, previous)
        if run is None or c is None:
            return []
        return self._format(self._lines(pod, run, c, previous, time.time()), tail_lines,
                            timestamps)

    async def follow_log(self, namespace: str, name: str, container: str | None, *,
                         timestamps: bool = False) -> AsyncIterator[str]:
        """Yield each line printed from now on, until the container stops or the pod goes
        away. (The server sends what `pod_log` returned first: lines so far, with tailLines.)
        """
        pod, run, c = self._log_target(namespace, name, container, False)
        if run is None or c is None:
            return
        key = (namespace, name)
        uid = pod["metadata"]["uid"]
        now = time.time()
        seen = len(self._lines(pod, run, c, False, now))
        started = c.started_wall
        waiter = asyncio.Event()
        self.followers.setdefault(key, set()).add(waiter)
        try:
            while True:
                now_pod = self.cluster.peek(POD, namespace, name)
                run = self.runs.get(key)
                if now_pod is None or now_pod["metadata"]["uid"] != uid or run is None:
                    return
                pod = now_pod
                c = run.containers.get(c.name) or c
                if c.started_wall != started:
                    return  # restarted: a new log stream (like the real kubelet ends follow)
                now = time.time()
                lines = self._lines(pod, run, c, False, now)
                for line in self._format(lines[seen:], None, timestamps):
                    yield line
                seen = len(lines)
                if c.stage == "exited" or run.done:
                    return
                ctx = self._log_context(pod, run, c, c.started_wall or now, c.exit_code)
                nxt = podlogs.next_line_at(ctx, now)
                timeout = None if nxt is None else max(0.01, nxt - now)
                if c.ends_at is not None:
                    ends_in = max(0.01, c.ends_at - self.cluster.now())
                    timeout = ends_in if timeout is None else min(timeout, ends_in)
                waiter.clear()
                try:
                    await asyncio.wait_for(waiter.wait(), timeout)
                except TimeoutError:
                    pass
        finally:
            waiters = self.followers.get(key)
            if waiters is not None:
                waiters.discard(waiter)
                if not waiters:
                    del self.followers[key]
