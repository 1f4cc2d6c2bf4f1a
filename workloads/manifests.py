"""The Kubernetes objects of a workload, as pure functions: spec in, dicts out.

No client, no database, no settings lookups: `WorkloadSpec` carries everything, so the same spec
always gives the same dicts, the functions are tested by comparing dicts and against the
Kubernetes schema, and a retried launch applies exactly what the first try did.

A service workload is a Deployment (one replica) and a LoadBalancer Service; a batch workload is
a Job. Either may come with a Secret holding the values of `secret_env` (a Jupyter token), which
the pod reads through `secretKeyRef` so that the value is never in the pod spec. Every object
carries `labels(spec)`; the tracker finds them by `app.kubernetes.io/managed-by=gpu-portal` and
maps them back to the workload by `gpu-portal.io/workload-id`.

A service with a `proxy` (every service the portal launches) has the authenticating
proxy as a second container of its pod (access/proxy.py). The proxy's port is the pod's
port named "http", the one the Service and the tenant's NetworkPolicy reach; the application's
port is named "app" and is reached only by the proxy, over the pod's loopback. The proxy's
credentials are `secret_data` (keys of the same Secret that are no environment variable of the
application), and its files (configuration, error page) are keys of that Secret too, derived
from the spec.

A workload with `ssh` runs the portal's SSH server inside its application container
(access/ssh_server.py): an init container puts the binary in place, the container's command
becomes the server's wrapper around the program (the command, else the image's `entrypoint`),
and the server's keys are keys of the same Secret. The proxy routes SSH's WebSocket to it.

A distributed batch workload (`engine`) is one object its engine expands into pods:
a JobSet of one indexed pod per node under torchrun (make_jobset), or an MPIJob of a launcher
running mpirun and one worker per node (make_mpijob) behind a NetworkPolicy of its own.
"""

from __future__ import annotations

import base64
import dataclasses
import re
from typing import Any

from access.proxy import (
    CLIENT_SECRET_KEY,
    COOKIE_SECRET_KEY,
    ProxySpec,
    make_proxy_container,
    make_proxy_volumes,
    proxy_files,
)
from access.ssh_server import (
    SECRET_FILES,
    SSHServerSpec,
    make_init_container,
    make_volume_mounts,
    make_volumes,
    run_argv,
)
from catalogue.environment import ENV_NAME
from catalogue.images import DEFAULT_TAG, parse_image_reference
from credentials.manifests import (
    SecretUse,
    pod_env,
    pod_mounts,
    pod_pull_secrets,
    pod_volumes,
)
from kube.labels import (
    ANNOTATION_ADDRESS_POOL,
    EXPOSURES,
    JOBSET_REPLICATED_JOB,
    LABEL_EXPOSED,
    LABEL_INSTANCE,
    LABEL_ISOLATED,
    LABEL_NAME,
    LABEL_OWNER,
    LABEL_OWNER_ID,
    LABEL_PROJECT_ID,
    LABEL_WORKLOAD_ID,
    MANAGED_BY,
    MAX_LABEL,
    MPI_ROLE_LABEL,
    MPI_WORKER,
    jobset_pod_host,
    label_value,
)
from tenants.manifests import EXPOSED_PORT_NAME, SERVICE_ACCOUNT_NAME

Manifest = dict[str, Any]

SERVICE = "service"
BATCH = "batch"
KINDS = (SERVICE, BATCH)
# how a batch workload runs on its nodes (catalogue Template.engine): one pod (a Job), a JobSet
# of one indexed pod per node under torchrun, an MPIJob (a launcher and one worker per node)
SINGLE, JOBSET, MPI = "", "jobset", "mpi"
ENGINES = (SINGLE, JOBSET, MPI)

# torchrun's rendezvous on rank 0 (the port PyTorch's own examples and Kubeflow use), and the
# variables every pod of a JobSet gets, which its torchrun command line reads
MASTER_PORT = 29500
TORCHRUN_ENV = ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "NODE_RANK", "NPROC_PER_NODE")
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"  # the Job controller's annotation
# the MPI operator's Open MPI image (docker.io/mpioperator/openmpi, build/base of the operator):
# user mpiuser (uid 1000), an SSH server for that user on port 2222 with this configuration;
# the operator mounts the group's SSH keys at MPI_SSH_PATH
MPI_HOME = "/home/mpiuser"
MPI_SSH_PATH = f"{MPI_HOME}/.ssh"
MPI_SSHD = ("/usr/sbin/sshd", "-De", "-f", f"{MPI_HOME}/.sshd_config")
MPI_SSH_PORT = 2222
# the launcher only runs mpirun: no GPU, a core and a little memory, on any node
MPI_LAUNCHER_CPU = "1"
MPI_LAUNCHER_MEMORY = "1Gi"


CONTAINER_NAME = "app"
# the application's port when a proxy stands in front of it: not "http", which the Service and
# the NetworkPolicy reach, so that nothing outside the pod addresses the application by name
APP_PORT_NAME = "app"
GPU_TAINT_KEY = "nvidia.com/gpu"
# the name of a DRA type's request in the claim template, of the pod's claim and of the
# container's use of it
GPU_CLAIM_NAME = "gpu"
HOSTNAME_LABEL = "kubernetes.io/hostname"  # every node's, set by its kubelet

# The tenant's persistent home volume is mounted here in every workload that asks for it. A
# path of its own rather than the image's home directory (/home/jovyan, /root, /workspace in
# NGC images): mounting over those would hide what the image ships there. Templates that want
# it as their working directory point the application at it (e.g. Jupyter's root_dir).
HOME_MOUNT_PATH = "/home/portal"
HOME_VOLUME = "home"
MOUNT_VOLUME_PREFIX = "mount"  # the pod's volumes of a launch's mounts: mount-0, mount-1 …
# A batch job's checkpoint directory: its folder on a volume (`sub_path`, made by the kubelet
# when it is not there yet) mounted read-write here, and named by CHECKPOINT_ENV in the
# program's environment. A requeued copy runs from the same frozen launch spec, so it mounts the
# same folder and finds what the stopped run saved.
CHECKPOINT_MOUNT_PATH = "/portal/checkpoint"
CHECKPOINT_VOLUME = "checkpoint"
CHECKPOINT_ENV = "PORTAL_CHECKPOINT_DIR"
SHM_VOLUME = "dshm"

# what the API server accepts as an environment variable name (and, for secret_env, as a key of
# the Secret): refused here with a clear message rather than by a 422 halfway through a launch
SECRET_KEY = re.compile(r"[-._a-zA-Z0-9]+")  # what the API server accepts as a Secret's key


@dataclasses.dataclass(frozen=True)
class GpuClaim:
    """GPUs asked through dynamic resource allocation instead of an extended resource: each pod
    gets a ResourceClaim from the workload's ResourceClaimTemplate, for `gpu_count` devices of
    `device_class` matching `selector` (CEL; "" none beyond the class's), which the scheduler
    allocates from the devices the driver publishes and which places the pod on their node."""

    device_class: str
    selector: str = ""


@dataclasses.dataclass(frozen=True)
class PodMount:
    """A volume's claim mounted at `path` in the application's container."""

    claim: str
    path: str
    read_only: bool = False
    sub_path: str = ""  # a folder of the volume, relative to its root (the checkpoint's)


@dataclasses.dataclass(frozen=True)
class WorkloadSpec:
    workload_id: int
    name: str  # base name of every object (from naming.workload_object_name)
    namespace: str
    project_id: str  # Keystone project id (tenant)
    owner: str  # the Keystone user name (display: the owner-id label is the key)
    owner_id: str  # Keystone user id
    template: str  # template slug: jupyter | digits | tensorboard | custom
    kind: str  # "service" | "batch"
    image: str
    command: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()  # plain env vars, in order
    secret_env: tuple[tuple[str, str], ...] = ()  # values kept in the workload's Secret
    # more keys of that Secret, read by no env var of the application: the proxy's credentials
    secret_data: tuple[tuple[str, str], ...] = ()
    port: int | None = None  # the application's port ("http", or "app" behind a proxy)
    gpu_resource: str = "nvidia.com/gpu"  # or a MIG resource such as nvidia.com/mig-1g.10gb
    gpu_count: int = 1  # per node
    gpu_claim: GpuClaim | None = None  # a DRA type's devices, in place of gpu_resource
    nodes: int = 1  # a distributed workload's nodes (one rank each)
    engine: str = SINGLE  # SINGLE | JOBSET | MPI
    node_selector: tuple[tuple[str, str], ...] = ()
    # nodes its pods must not land on (a maintenance window it would cross): required node
    # affinity `kubernetes.io/hostname NotIn` them
    avoid_nodes: tuple[str, ...] = ()
    cpu: str = "4"  # requests = limits
    memory: str = "16Gi"
    max_runtime_seconds: int | None = None  # Job activeDeadlineSeconds (services: the portal)
    run_as_non_root: bool = True
    run_as_user: int | None = None  # e.g. 1000 for jupyter images
    home_claim: str | None = None  # PVC name of the tenant's home volume, at HOME_MOUNT_PATH
    mounts: tuple[PodMount, ...] = ()  # the launch's volumes (workloads/mounts.py)
    # a batch job's checkpoint folder, at CHECKPOINT_MOUNT_PATH (CHECKPOINT_ENV names it)
    checkpoint: PodMount | None = None
    lb_address_pool: str | None = None  # MetalLB pool annotation value
    # how a service is reached: "loadbalancer" (its Service gets an address of the pool) or
    # "shared" (a ClusterIP Service behind the site's gateway, which routes `host` to it
    # through an Ingress of class `ingress_class`)
    exposure: str = "loadbalancer"
    host: str | None = None
    ingress_class: str | None = None
    pod_annotations: tuple[tuple[str, str], ...] = ()  # e.g. kubesim.io/run-seconds
    backoff_limit: int = 0
    ttl_seconds_after_finished: int = 3600
    proxy: ProxySpec | None = None  # the authenticating proxy in front of a service
    # the SSH server beside the program; `entrypoint`: the program it wraps when
    # `command` is empty (the image's ENTRYPOINT, as its template names it)
    ssh: SSHServerSpec | None = None
    entrypoint: tuple[str, ...] = ()
    # queueing on Kueue: the labels naming the tenant's queue and the priority class
    # (tenants/kueue.py); on the Job (created suspended: Kueue starts it when it admits
    # it) or on the Deployment and its pods (held by Kueue's scheduling gate until admitted)
    queue_labels: tuple[tuple[str, str], ...] = ()
    # who runs a batch workload's object instead of its own controller here: MultiKueue's
    # controller for one dispatched to a worker cluster (the value Kueue's webhook would set)
    managed_by: str | None = None
    # the user's and project's secrets it reads (credentials/manifests.py): variables by
    # secretKeyRef, files in read-only secret volumes, registry logins as imagePullSecrets
    secrets: tuple[SecretUse, ...] = ()

    def __post_init__(self) -> None:
        # Combinations no manifest can express are refused here, before anything is sent.
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, not {self.kind!r}")
        if self.kind == SERVICE and self.port is None:
            raise ValueError("a service workload needs a port")
        if self.port is not None and not 1 <= self.port <= 65535:
            raise ValueError(f"port {self.port} is outside 1-65535")
        if self.gpu_count < 0:
            raise ValueError("gpu_count cannot be negative")
        if self.engine not in ENGINES:
            raise ValueError(f"engine must be one of {ENGINES}, not {self.engine!r}")
        if self.nodes < 1:
            raise ValueError("nodes must be at least 1")
        if self.engine and self.kind != BATCH:
            raise ValueError("a distributed workload runs as a batch job")
        if self.nodes > 1 and not self.engine:
            raise ValueError("only a distributed workload (a JobSet or an MPIJob) spans nodes")
        self._check_group()
        paths = [mount.path for mount in self.mounts] + ([HOME_MOUNT_PATH] if self.home_claim
                                                         else [])
        if self.checkpoint is not None:
            if self.kind != BATCH:
                raise ValueError("only a batch workload has a checkpoint directory")
            if self.checkpoint.path != CHECKPOINT_MOUNT_PATH or self.checkpoint.read_only or \
                    not self.checkpoint.sub_path or self.checkpoint.sub_path.startswith("/") or \
                    ".." in self.checkpoint.sub_path.split("/"):
                raise ValueError(f"a checkpoint is a folder of a volume mounted read-write at "
                                 f"{CHECKPOINT_MOUNT_PATH}: {self.checkpoint}")
            paths.append(CHECKPOINT_MOUNT_PATH)
        if len(set(paths)) != len(paths) or not all(p.startswith("/") for p in paths):
            raise ValueError(f"mount paths must be absolute and distinct: {paths}")
        if self.max_runtime_seconds is not None and self.max_runtime_seconds <= 0:
            raise ValueError("max_runtime_seconds must be positive")
        parse_image_reference(self.image)  # ValueError with the grammar's message
        names = [key for key, _ in self.env] + [key for key, _ in self.secret_env]
        if self.checkpoint is not None:
            names.append(CHECKPOINT_ENV)
        secret_names = [name for use in self.secrets for name in use.env_names]
        if len(set(secret_names)) != len(secret_names) or set(secret_names) & set(names):
            raise ValueError("a variable of a secret is set twice")
        for key in names:
            if not ENV_NAME.fullmatch(key):
                raise ValueError(f"{key!r} is not a valid environment variable name")
        secret_names = [key for key, _ in self.secret_env]
        if len(set(secret_names)) != len(secret_names) or \
                set(secret_names) & {key for key, _ in self.env}:
            # a Secret key given twice, or an env var shadowed by a secret one
            raise ValueError("an environment variable is given twice")
        data_keys = [key for key, _ in self.secret_data]
        for key in data_keys:
            if not SECRET_KEY.fullmatch(key):
                raise ValueError(f"{key!r} is not a valid key of a Secret")
        if len(set(data_keys)) != len(data_keys) or set(data_keys) & set(secret_names):
            raise ValueError("a key of the Secret is given twice")
        if self.proxy is not None:
            self._check_proxy(self.proxy, set(secret_names), set(data_keys))
        if self.ssh is not None:
            self._check_ssh(self.ssh, set(data_keys))
        if self.exposure not in EXPOSURES:
            raise ValueError(f"exposure must be one of {EXPOSURES}, not {self.exposure!r}")
        if self.exposed and self.exposure == "shared" and not self.host:
            raise ValueError("a service behind the shared gateway needs its host name")

    @property
    def exposed(self) -> bool:
        """Reached from outside the pod: a service, or a batch job with SSH (through its
        proxy, on the Service's port)."""
        return self.kind == SERVICE or self.proxy is not None

    @property
    def service_port(self) -> int:
        """The Service's port: the application's, or the proxy's for a batch job's SSH."""
        if self.port is not None:
            return self.port
        assert self.proxy is not None  # only an exposed workload has a Service
        return self.proxy.listen_port

    def _check_group(self) -> None:
        # The names the engines give the group's pods must be DNS labels, or their webhooks
        # refuse the whole object (JobSet's counts a 5-character suffix, kube/labels.py)
        if self.engine == JOBSET:
            longest = f"{jobset_host(self, self.nodes - 1)}-abcde"
        elif self.engine == MPI:
            longest = f"{self.name}-worker-{self.nodes - 1}"
        else:
            return
        if len(longest) > MAX_LABEL:
            raise ValueError(f"the name {self.name!r} is too long for {self.nodes} nodes: its "
                             f"pods would be named {longest!r}, over {MAX_LABEL} characters")
        taken = set(TORCHRUN_ENV if self.engine == JOBSET else ()) & {
            *(key for key, _ in (*self.env, *self.secret_env)),
            *(name for use in self.secrets for name in use.env_names)}
        if taken:
            raise ValueError(f"{', '.join(sorted(taken))} {'is' if len(taken) == 1 else 'are'} "
                             "set by the portal in every pod of the group")

    def _check_ssh(self, ssh: SSHServerSpec, data_keys: set[str]) -> None:
        # an SSH server nobody can reach, or one that would not start, is refused here
        if self.engine:
            raise ValueError("a distributed workload's ranks have no SSH server")
        if not (self.command or self.entrypoint):
            raise ValueError("the SSH server wraps the program, and none is known (no command, "
                             "no entrypoint)")
        if self.proxy is None or self.proxy.ssh_port != ssh.port:
            raise ValueError("the SSH server is reached only through the proxy, which must "
                             f"route to its port {ssh.port}")
        if ssh.port == self.port:
            raise ValueError(f"the SSH server and the application both want port {ssh.port}")
        if ssh.secret_name != self.name:
            raise ValueError("the SSH server's keys must be in the workload's own Secret")
        missing = set(SECRET_FILES) - data_keys
        if missing:
            raise ValueError(f"the Secret lacks the SSH server's {', '.join(sorted(missing))}")

    def _check_proxy(self, proxy: ProxySpec, secret_names: set[str],
                     data_keys: set[str]) -> None:
        # A proxy that could not reach the application, or whose pod would wait forever for a
        # Secret key that is not there, is refused here rather than found as a pod that never
        # becomes ready.
        if self.kind != SERVICE and (proxy.upstream_port is not None or proxy.ssh_port is None):
            raise ValueError("a batch job's proxy is there for SSH only: no application "
                             "behind it, a route to the SSH server")
        if self.kind == SERVICE and proxy.upstream_port != self.port:
            raise ValueError(f"the proxy forwards to port {proxy.upstream_port}, but the "
                             f"application listens on {self.port}")
        if proxy.listen_port == self.port:
            raise ValueError(f"the proxy and the application both want port {self.port}")
        if proxy.secret_name != self.name:
            raise ValueError("the proxy's credentials must be in the workload's own Secret")
        missing = {CLIENT_SECRET_KEY, COOKIE_SECRET_KEY} - data_keys
        if missing:
            raise ValueError(f"the Secret lacks the proxy's {', '.join(sorted(missing))}")
        if set(proxy_files(proxy)) & (secret_names | data_keys):
            raise ValueError("a key of the Secret is also one of the proxy's files")
        if proxy.upstream_token_env and proxy.upstream_token_env not in secret_names:
            raise ValueError(f"the proxy sends {proxy.upstream_token_env} upstream, but the "
                             "Secret does not hold it")


def labels(spec: WorkloadSpec) -> dict[str, str]:
    """The labels of every object of the workload (and of its pods)."""
    return {
        **MANAGED_BY,
        LABEL_NAME: label_value(spec.template),
        LABEL_INSTANCE: spec.name,
        LABEL_WORKLOAD_ID: str(spec.workload_id),
        LABEL_PROJECT_ID: label_value(spec.project_id),
        LABEL_OWNER: label_value(spec.owner),
        LABEL_OWNER_ID: label_value(spec.owner_id),
    }


def selector(spec: WorkloadSpec) -> dict[str, str]:
    """What picks the workload's pods: its id, among the portal's objects."""
    return {**MANAGED_BY, LABEL_WORKLOAD_ID: str(spec.workload_id)}


def _metadata(spec: WorkloadSpec, annotations: dict[str, str] | None = None) -> Manifest:
    meta: Manifest = {"name": spec.name, "namespace": spec.namespace, "labels": labels(spec)}
    if annotations:
        meta["annotations"] = annotations
    return meta


def _secret_values(spec: WorkloadSpec) -> dict[str, str]:
    values = dict((*spec.secret_env, *spec.secret_data))
    if spec.proxy is not None:
        # no secret themselves, but mounted beside the credentials from the one Secret
        values.update(proxy_files(spec.proxy))
    return values


def make_secret(spec: WorkloadSpec) -> Manifest | None:
    """The Secret holding the values of `secret_env` and `secret_data` (and a proxy's files),
    or None when there are none."""
    values = _secret_values(spec)
    if not values:
        return None
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": _metadata(spec),
        "type": "Opaque",
        # `data`, not `stringData`: what the server stores and returns, so a re-read compares
        "data": {key: base64.b64encode(value.encode()).decode("ascii")
                 for key, value in values.items()},
    }


def _env(spec: WorkloadSpec) -> list[Manifest]:
    env: list[Manifest] = [{"name": key, "value": value} for key, value in spec.env]
    if spec.checkpoint is not None:
        env.append({"name": CHECKPOINT_ENV, "value": CHECKPOINT_MOUNT_PATH})
    env += [{"name": key, "valueFrom": {"secretKeyRef": {"name": spec.name, "key": key}}}
            for key, _ in spec.secret_env]
    return env + pod_env(spec.secrets)


def _resources(spec: WorkloadSpec) -> Manifest:
    # requests = limits: the pod is Guaranteed, so it is the last to be evicted, and the
    # ResourceQuota (which counts requests) sees exactly what the pod holds.
    amounts = {"cpu": spec.cpu, "memory": spec.memory}
    resources: Manifest = {}
    if spec.gpu_count and spec.gpu_claim is not None:
        # the devices come with the pod's claim, not as an amount of a resource
        resources["claims"] = [{"name": GPU_CLAIM_NAME}]
    elif spec.gpu_count:
        amounts[spec.gpu_resource] = str(spec.gpu_count)
    return {"limits": dict(amounts), "requests": dict(amounts), **resources}


def _pull_policy(image: str) -> str:
    """Kubernetes' own default, spelled out: a moving tag is pulled each time."""
    ref = parse_image_reference(image)
    if ref.digest is None and (ref.tag or DEFAULT_TAG) == DEFAULT_TAG:
        return "Always"
    return "IfNotPresent"


def _container(spec: WorkloadSpec) -> Manifest:
    container: Manifest = {
        "name": CONTAINER_NAME,
        "image": spec.image,
        "imagePullPolicy": _pull_policy(spec.image),
        "resources": _resources(spec),
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
        },
        "volumeMounts": _volume_mounts(spec),
    }
    # argv lists, handed to the runtime as they are: no shell ever parses them
    if spec.ssh is not None:
        container["command"] = run_argv(spec.ssh, spec.command or spec.entrypoint)
    elif spec.command:
        container["command"] = list(spec.command)
    if spec.args:
        container["args"] = list(spec.args)
    if spec.env or spec.secret_env or spec.checkpoint is not None or pod_env(spec.secrets):
        container["env"] = _env(spec)
    port_name = _app_port_name(spec)
    if spec.port is not None:
        container["ports"] = [
            {"name": port_name, "containerPort": spec.port, "protocol": "TCP"}
        ]
    if spec.kind == SERVICE:
        # the application's own readiness, behind the proxy too: the proxy's port answers as
        # soon as the proxy runs, the application's only once the application does
        container["readinessProbe"] = {
            "tcpSocket": {"port": port_name},
            "periodSeconds": 5,
            "failureThreshold": 3,
        }
    return container


def _app_port_name(spec: WorkloadSpec) -> str:
    """The application's port is the pod's "http" only when nothing stands in front of it."""
    return APP_PORT_NAME if spec.proxy is not None else EXPOSED_PORT_NAME


def _volume_mounts(spec: WorkloadSpec) -> list[Manifest]:
    mounts = [{"name": SHM_VOLUME, "mountPath": "/dev/shm"}]
    if spec.home_claim:
        mounts.append({"name": HOME_VOLUME, "mountPath": HOME_MOUNT_PATH})
    for index, mount in enumerate(spec.mounts):
        entry: Manifest = {"name": f"{MOUNT_VOLUME_PREFIX}-{index}", "mountPath": mount.path}
        if mount.read_only:
            entry["readOnly"] = True
        mounts.append(entry)
    if spec.checkpoint is not None:
        mounts.append({"name": CHECKPOINT_VOLUME, "mountPath": CHECKPOINT_MOUNT_PATH,
                       "subPath": spec.checkpoint.sub_path})
    if spec.ssh is not None:
        mounts += make_volume_mounts()
    return mounts + pod_mounts(spec.secrets)


def _volumes(spec: WorkloadSpec) -> list[Manifest]:
    # The runtime's default /dev/shm is 64 MiB; PyTorch DataLoader workers and NCCL need far
    # more. A memory-backed emptyDir counts against the pod's memory limit and is sized by it.
    volumes: list[Manifest] = [{"name": SHM_VOLUME, "emptyDir": {"medium": "Memory"}}]
    if spec.home_claim:
        volumes.append({"name": HOME_VOLUME,
                        "persistentVolumeClaim": {"claimName": spec.home_claim}})
    for index, mount in enumerate(spec.mounts):
        claim: Manifest = {"claimName": mount.claim}
        if mount.read_only:
            claim["readOnly"] = True
        volumes.append({"name": f"{MOUNT_VOLUME_PREFIX}-{index}", "persistentVolumeClaim": claim})
    if spec.checkpoint is not None:
        volumes.append({"name": CHECKPOINT_VOLUME,
                        "persistentVolumeClaim": {"claimName": spec.checkpoint.claim}})
    if spec.proxy is not None:
        volumes += make_proxy_volumes(spec.proxy)
    if spec.ssh is not None:
        volumes += make_volumes(spec.ssh)
    return volumes + pod_volumes(spec.secrets)


def _pod_security_context(spec: WorkloadSpec) -> Manifest:
    context: Manifest = {"seccompProfile": {"type": "RuntimeDefault"}}
    if spec.run_as_non_root:
        context["runAsNonRoot"] = True
    if spec.run_as_user is not None:
        context["runAsUser"] = spec.run_as_user
        # the user's own group owns the mounted volumes, so the home volume is writable
        context["fsGroup"] = spec.run_as_user
    return context


def _containers(spec: WorkloadSpec) -> list[Manifest]:
    containers = [_container(spec)]
    if spec.proxy is not None and spec.kind == SERVICE:
        containers.append(make_proxy_container(spec.proxy))
    return containers


def _init_containers(spec: WorkloadSpec) -> list[Manifest]:
    """The SSH server's installer, and a batch job's proxy as a native sidecar (an init
    container that runs beside the application, restartPolicy Always): the Job completes when
    the application ends, whatever the proxy does."""
    init: list[Manifest] = []
    if spec.ssh is not None:
        init.append(make_init_container(spec.ssh))
    if spec.proxy is not None and spec.kind != SERVICE:
        init.append({**make_proxy_container(spec.proxy), "restartPolicy": "Always"})
    return init


def _avoiding(nodes: tuple[str, ...]) -> Manifest:
    """Required node affinity: none of these nodes (by their host name label)."""
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": HOSTNAME_LABEL, "operator": "NotIn", "values": sorted(nodes)}]}]}}}


def make_pod_template(spec: WorkloadSpec) -> Manifest:
    """The pod of the workload, shared by its Deployment and its Job."""
    pod_labels = labels(spec)
    if spec.exposed:
        # the tenant's NetworkPolicy admits traffic to port "http" of pods labelled so, and
        # nothing else: behind a proxy, port "http" is the proxy's
        pod_labels[LABEL_EXPOSED] = "true"
    if spec.kind == SERVICE:
        pod_labels.update(spec.queue_labels)
    metadata: Manifest = {"labels": pod_labels}
    if spec.pod_annotations:
        metadata["annotations"] = dict(spec.pod_annotations)

    pod_spec: Manifest = {
        "serviceAccountName": SERVICE_ACCOUNT_NAME,
        "automountServiceAccountToken": False,  # workloads have no business with the API
        "enableServiceLinks": False,  # no env vars for every Service of the namespace
        "restartPolicy": "Always" if spec.kind == SERVICE else "Never",
        "securityContext": _pod_security_context(spec),
        "containers": _containers(spec),
        "volumes": _volumes(spec),
    }
    init_containers = _init_containers(spec)
    if init_containers:
        pod_spec["initContainers"] = init_containers
    if pull_secrets := pod_pull_secrets(spec.secrets):
        pod_spec["imagePullSecrets"] = pull_secrets
    claimed = spec.gpu_claim is not None and spec.gpu_count > 0
    if claimed:
        # a claim of its own per pod, made from the workload's template; the scheduler places
        # the pod on the node of the devices it allocates, so no node selector is needed
        pod_spec["resourceClaims"] = [{"name": GPU_CLAIM_NAME,
                                       "resourceClaimTemplateName": spec.name}]
    elif spec.node_selector:
        pod_spec["nodeSelector"] = dict(spec.node_selector)
    if spec.avoid_nodes:
        pod_spec["affinity"] = _avoiding(spec.avoid_nodes)
    if spec.gpu_count:
        # GPU nodes are tainted so that only pods asking for GPUs land there
        pod_spec["tolerations"] = [
            {"key": GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}
        ]
    return {"metadata": metadata, "spec": pod_spec}


def make_resource_claim_template(spec: WorkloadSpec) -> Manifest | None:
    """The ResourceClaimTemplate each of the workload's pods gets its claim from (None when it
    asks no device through DRA): one request of `gpu_count` devices of the type's device class
    and selector. A claim made from it is owned by its pod and goes with it."""
    claim = spec.gpu_claim
    if claim is None or not spec.gpu_count:
        return None
    exactly: Manifest = {"deviceClassName": claim.device_class,
                         "allocationMode": "ExactCount", "count": spec.gpu_count}
    if claim.selector:
        exactly["selectors"] = [{"cel": {"expression": claim.selector}}]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": _metadata(spec),
        "spec": {"metadata": {"labels": labels(spec)},
                 "spec": {"devices": {"requests": [{"name": GPU_CLAIM_NAME,
                                                    "exactly": exactly}]}}},
    }


def make_deployment(spec: WorkloadSpec) -> Manifest:
    """A service's Deployment: one replica, replaced by Recreate so that an old and a new pod
    never hold GPUs at the same time (a rolling update would need twice the quota)."""
    metadata = _metadata(spec)
    metadata["labels"].update(spec.queue_labels)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata,
        "spec": {
            "replicas": 1,
            "revisionHistoryLimit": 1,
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": selector(spec)},
            "template": make_pod_template(spec),
        },
    }


def make_service(spec: WorkloadSpec) -> Manifest:
    """The Service in front of a service's pod: of type LoadBalancer, MetalLB gives it an
    address; behind the shared gateway (`exposure` "shared"), of type ClusterIP, reached only
    through its Ingress (make_ingress).

    It targets the pod's port "http": the proxy's where there is one, the application's
    otherwise. Its own port stays the application's, so the address the user opens is the same
    with or without a proxy."""
    ports = [{"name": EXPOSED_PORT_NAME, "protocol": "TCP", "port": spec.service_port,
              "targetPort": EXPOSED_PORT_NAME}]
    if spec.exposure == "shared":
        return {"apiVersion": "v1", "kind": "Service", "metadata": _metadata(spec),
                "spec": {"type": "ClusterIP", "selector": selector(spec), "ports": ports}}
    annotations = {ANNOTATION_ADDRESS_POOL: spec.lb_address_pool} if spec.lb_address_pool else None
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(spec, annotations),
        "spec": {
            "type": "LoadBalancer",
            # MetalLB answers for the address itself: no node port opened on every node
            "allocateLoadBalancerNodePorts": False,
            "selector": selector(spec),
            "ports": ports,
        },
    }


def make_ingress(spec: WorkloadSpec) -> Manifest:
    """A service's route through the shared gateway: its host name, every path, to its
    Service's port "http" (the authenticating proxy). A standard networking.k8s.io/v1 Ingress:
    any controller of the class serves it (Traefik in the tests and stack/k8s/traefik.py)."""
    ingress_spec: Manifest = {"rules": [{"host": spec.host, "http": {"paths": [{
        "path": "/", "pathType": "Prefix",
        "backend": {"service": {"name": spec.name, "port": {"name": EXPOSED_PORT_NAME}}},
    }]}}]}
    if spec.ingress_class:
        ingress_spec["ingressClassName"] = spec.ingress_class
    return {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "metadata": _metadata(spec), "spec": ingress_spec}


def make_job(spec: WorkloadSpec) -> Manifest:
    """A batch workload's Job: one pod, not retried unless asked, stopped at the maximum
    runtime, and removed an hour after it ends (the portal has recorded the outcome by then)."""
    job_spec: Manifest = {
        "completions": 1,
        "parallelism": 1,
        "backoffLimit": spec.backoff_limit,
        "ttlSecondsAfterFinished": spec.ttl_seconds_after_finished,
        "template": make_pod_template(spec),
    }
    if spec.max_runtime_seconds is not None:
        # counted from when it runs: a Job's timer starts again when it is unsuspended
        job_spec["activeDeadlineSeconds"] = spec.max_runtime_seconds
    metadata = _metadata(spec)
    if spec.queue_labels:
        metadata["labels"].update(spec.queue_labels)
        job_spec["suspend"] = True  # Kueue unsuspends it when it admits it
    if spec.managed_by:
        job_spec["managedBy"] = spec.managed_by
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "spec": job_spec}


# --- distributed workloads: a JobSet under torchrun, an MPIJob under mpirun ------

def jobset_host(spec: WorkloadSpec, rank: int) -> str:
    """The host name of a JobSet's pod `rank` (kube/labels.py writes it, and reads its pods'
    names back)."""
    return jobset_pod_host(spec.name, rank)


def master_addr(spec: WorkloadSpec) -> str:
    """Rank 0's name in the JobSet's headless Service (its subdomain, named as the JobSet):
    resolved by every pod of the namespace, before rank 0 is ready too."""
    return f"{jobset_host(spec, 0)}.{spec.name}"


def torchrun_argv(spec: WorkloadSpec) -> list[str]:
    """torchrun with the group's shape from the pod's own variables (Kubernetes expands
    `$(VAR)` in a container's command and arguments; no shell), then the researcher's program
    as it is: `--no-python` runs its first word, not `python <it>`."""
    return ["torchrun", "--nnodes=$(WORLD_SIZE)", "--nproc-per-node=$(NPROC_PER_NODE)",
            "--node-rank=$(NODE_RANK)", "--master-addr=$(MASTER_ADDR)",
            "--master-port=$(MASTER_PORT)", "--no-python", *spec.command, *spec.args]


def processes_per_node(spec: WorkloadSpec) -> int:
    """One process per GPU (torchrun's, mpirun's slots); one on a node without GPUs."""
    return max(spec.gpu_count, 1)


def _torchrun_env(spec: WorkloadSpec) -> list[Manifest]:
    # WORLD_SIZE counts nodes (torchrun's --nnodes), as Kubeflow's PyTorchJob sets it; torchrun
    # gives each of its processes the world of processes itself
    return [
        {"name": "MASTER_ADDR", "value": master_addr(spec)},
        {"name": "MASTER_PORT", "value": str(MASTER_PORT)},
        {"name": "WORLD_SIZE", "value": str(spec.nodes)},
        {"name": "NODE_RANK", "valueFrom": {"fieldRef": {
            "fieldPath": f"metadata.annotations['{COMPLETION_INDEX}']"}}},
        {"name": "NPROC_PER_NODE", "value": str(processes_per_node(spec))},
    ]


def _one_per_node(match: dict[str, str]) -> Manifest:
    """Required anti-affinity among the pods `match` picks: no two on one node."""
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": match}, "topologyKey": HOSTNAME_LABEL}]}}


def _group_metadata(spec: WorkloadSpec) -> Manifest:
    metadata = _metadata(spec)
    metadata["labels"].update(spec.queue_labels)
    return metadata


def make_jobset(spec: WorkloadSpec) -> Manifest:
    """A `pytorch-ddp` workload: a JobSet of one Job of `nodes` indexed pods, one per node,
    each running the program under torchrun (torchrun_argv) with `gpu_count` GPUs.

    JobSet names the pods `<name>-r-0-<rank>` in a headless Service of its own named like the
    JobSet (network.enableDNSHostnames), which is how the ranks find rank 0. A failed rank
    fails its Job (backoffLimit 0), and the JobSet restarts the whole group up to
    `backoff_limit` times (failurePolicy.maxRestarts), then fails. The maximum runtime bounds
    each attempt (the Job's activeDeadlineSeconds). Queued, it is created suspended with the
    queue's labels: Kueue admits the group whole, as one Workload."""
    pod = make_pod_template(spec)
    pod_spec = pod["spec"]
    container = pod_spec["containers"][0]
    container["command"] = ["torchrun"]
    container["args"] = torchrun_argv(spec)[1:]
    container["env"] = [*container.get("env", []), *_torchrun_env(spec)]
    pod_spec["affinity"] = {**pod_spec.get("affinity", {}), **_one_per_node(selector(spec))}
    job_spec: Manifest = {
        "completionMode": "Indexed",
        "completions": spec.nodes,
        "parallelism": spec.nodes,
        "backoffLimit": 0,  # a failed rank fails the group: the JobSet restarts it whole
        "template": pod,
    }
    if spec.max_runtime_seconds is not None:
        job_spec["activeDeadlineSeconds"] = spec.max_runtime_seconds
    jobset_spec: Manifest = {
        "network": {"enableDNSHostnames": True, "subdomain": spec.name},
        "failurePolicy": {"maxRestarts": spec.backoff_limit},
        "ttlSecondsAfterFinished": spec.ttl_seconds_after_finished,
        # its Job carries JobSet's labels, not the portal's: the workload is the JobSet
        "replicatedJobs": [{"name": JOBSET_REPLICATED_JOB, "replicas": 1,
                            "template": {"spec": job_spec}}],
    }
    if spec.queue_labels:
        jobset_spec["suspend"] = True  # Kueue unsuspends it when it admits the group
    if spec.managed_by:
        jobset_spec["managedBy"] = spec.managed_by
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": _group_metadata(spec), "spec": jobset_spec}


def mpirun_argv(spec: WorkloadSpec) -> list[str]:
    """mpirun over every slot of every worker, passing the workload's variables on to the
    ranks (a process that sshd starts does not inherit the worker container's environment),
    then the researcher's program as it is."""
    names = [*(key for key, _ in (*spec.env, *spec.secret_env)),
             *((CHECKPOINT_ENV,) if spec.checkpoint is not None else ()),
             *(name for use in spec.secrets for name in use.env_names)]
    forwarded = [arg for key in names for arg in ("-x", key)]
    return ["mpirun", "-n", str(spec.nodes * processes_per_node(spec)), *forwarded, *spec.command,
            *spec.args]


def _mpi_pod(spec: WorkloadSpec) -> Manifest:
    pod = make_pod_template(spec)
    # set per replica by the operator (it warns about one given in the pod), and the group's
    # pods are reached only by one another (make_group_network_policy)
    del pod["spec"]["restartPolicy"]
    pod["metadata"]["labels"][LABEL_ISOLATED] = "true"
    return pod


def make_mpijob(spec: WorkloadSpec) -> Manifest:
    """An `mpi` workload: an MPIJob of `nodes` workers, one per node with `gpu_count` GPUs and
    as many MPI slots, each running the image's SSH server as its user, and a launcher (no
    GPU, on any node) running the program under mpirun (mpirun_argv) once every worker is
    ready. The operator adds the group's SSH keys (a Secret `<name>-ssh`, mounted at
    MPI_SSH_PATH), the hostfile (a ConfigMap `<name>-config` at /etc/mpi, launcher only) and a
    headless Service `<name>`; nothing here has those names or paths. The launcher is retried
    `backoff_limit` times; the maximum runtime bounds the group; queued, it is created
    suspended with the queue's labels and Kueue admits the launcher and workers whole."""
    launcher = _mpi_pod(dataclasses.replace(
        spec, gpu_count=0, cpu=MPI_LAUNCHER_CPU, memory=MPI_LAUNCHER_MEMORY, node_selector=()))
    launcher_container = launcher["spec"]["containers"][0]
    launcher_container["command"] = ["mpirun"]
    launcher_container["args"] = mpirun_argv(spec)[1:]

    worker = _mpi_pod(dataclasses.replace(spec, command=MPI_SSHD[:1], args=MPI_SSHD[1:]))
    worker_container = worker["spec"]["containers"][0]
    worker_container["ports"] = [{"name": "ssh", "containerPort": MPI_SSH_PORT,
                                  "protocol": "TCP"}]
    # ready once sshd answers: the launcher starts only then (WaitForWorkersReady)
    worker_container["readinessProbe"] = {"tcpSocket": {"port": "ssh"}, "periodSeconds": 2}
    worker["spec"]["affinity"] = {**worker["spec"].get("affinity", {}),
                                  **_one_per_node({**selector(spec), MPI_ROLE_LABEL: MPI_WORKER})}
    # the tenant's guard admits a pod asking for GPUs in a queued namespace only with the
    # queue's label (deploy/base/tenant-admission.yaml); the operator creates the workers as
    # itself from this template. Kueue still admits them as the MPIJob's pods, one Workload
    worker["metadata"]["labels"].update(spec.queue_labels)

    run_policy: Manifest = {
        "cleanPodPolicy": "Running",
        "ttlSecondsAfterFinished": spec.ttl_seconds_after_finished,
        "backoffLimit": spec.backoff_limit,
    }
    if spec.max_runtime_seconds is not None:
        run_policy["activeDeadlineSeconds"] = spec.max_runtime_seconds
    if spec.queue_labels:
        run_policy["suspend"] = True  # Kueue unsuspends it when it admits the group
    if spec.managed_by:
        run_policy["managedBy"] = spec.managed_by
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": _group_metadata(spec),
        "spec": {
            "slotsPerWorker": processes_per_node(spec),
            "runPolicy": run_policy,
            "sshAuthMountPath": MPI_SSH_PATH,
            "launcherCreationPolicy": "WaitForWorkersReady",
            "mpiImplementation": "OpenMPI",
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "restartPolicy": "Never", "template": launcher},
                "Worker": {"replicas": spec.nodes, "restartPolicy": "Never",
                           "template": worker},
            },
        },
    }


def make_group_network_policy(spec: WorkloadSpec) -> Manifest:
    """An MPIJob's pods (launcher and workers) admit traffic from one another and nothing
    else: the workers' SSH servers take the launcher's key, and Open MPI's daemons call back
    to the launcher. The tenant's namespace-wide policy leaves pods labelled LABEL_ISOLATED
    out (tenants/manifests.py), so this is the only way in."""
    pods = {"podSelector": {"matchLabels": {**selector(spec), LABEL_ISOLATED: "true"}}}
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": _metadata(spec),
            "spec": {**pods, "policyTypes": ["Ingress"], "ingress": [{"from": [pods]}]}}


def workload_objects(spec: WorkloadSpec) -> list[Manifest]:
    """Every object of the workload, in creation order: the Secret and a DRA type's
    ResourceClaimTemplate first (the pod needs them), then the Deployment and Service of a service (and its Ingress behind the shared gateway),
    or the Job of a batch workload, the JobSet of a `jobset` one, or the NetworkPolicy and
    MPIJob of an `mpi` one (the policy first: no pod of the group is ever reachable from the
    rest of the namespace)."""
    objects = [obj for obj in (make_secret(spec), make_resource_claim_template(spec)) if obj]
    if spec.engine == JOBSET:
        objects.append(make_jobset(spec))
    elif spec.engine == MPI:
        objects += [make_group_network_policy(spec), make_mpijob(spec)]
    elif spec.kind == SERVICE:
        objects += [make_deployment(spec), make_service(spec)]
        if spec.exposure == "shared":
            objects.append(make_ingress(spec))
    else:
        objects.append(make_job(spec))
        if spec.exposed:  # SSH into the job while it runs, through its proxy
            objects.append(make_service(spec))
            if spec.exposure == "shared":
                objects.append(make_ingress(spec))
    return objects
