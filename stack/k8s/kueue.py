"""Kueue for the real control plane: its controller manager, run out of cluster, as an addon.

Kueue (sigs.k8s.io/kueue, built by stack/k8s/build.py as `kueue`) holds the portal's quotas as
ClusterQueues, admits queued Jobs and Deployments (tenants/kueue.py, workloads/queue.py) and preempts borrowers when a
lender needs its GPUs back. What running it outside a cluster takes (read from its sources and
its config/components):

- its CRDs (config/components/crd/bases in the module, read from the Go module cache, not
  copied here), with the conversion webhook its kustomization adds to localqueues,
  clusterqueues, cohorts, workloads and multikueueclusters, pointed at the process;
- its Mutating/ValidatingWebhookConfigurations (config/components/webhook/manifests.yaml):
  those of Kueue's own kinds and of the frameworks the portal uses (batch/job, pod,
  deployment, and for distributed training JobSet and MPIJob), pointed at https://127.0.0.1:<port> with this cluster's CA. The pod and
  deployment webhooks only see objects that carry a queue name (an objectSelector), so that a
  stopped Kueue does not stop every pod of the cluster from being created;
- a Configuration: leader election off, its own certificate management off (the serving
  certificate comes from the cluster's CA, `webhook.certDir`), health on a free loopback port,
  no metrics server, `manageJobsWithoutQueueName: false`, fair sharing, and `waitForPodsReady`
  (all or nothing: an admitted workload whose pods are not all Ready within `pods_ready_timeout`
  is evicted, its quota freed, and requeued after a backoff; v0.19 runs it always, 30 minutes
  unless told, unless the DisableWaitForPodsReady feature gate is on). The JobSet and MPIJob
  integrations need their CRDs served when Kueue starts: stack/k8s/jobset.py and
  stack/k8s/mpi_operator.py start first (stack/k8s/addons.py);
- `resources.deviceClassMappings`: the DeviceClass of each DRA GPU type the DRA addon's pools
  are for (stack/k8s/dra.py type_classes: the portal makes one per DRA type) counted under the
  resource that type's ClusterQueue quota is in (tenants/manifests.py), so that Kueue admits a
  DRA launch against its claims' devices, each type's apart (its DRA support,
  KueueDRAIntegration, is on by default in v0.19; a claim of a class not mapped leaves its
  Workload inadmissible). Kueue reads the mappings once, at start, as a site's Kueue does;
- the feature gate VisibilityOnDemand off: its visibility API server reads its certificate from
  the fixed path /visibility and is reached through an APIService whose Service must have a
  non-loopback endpoint; the portal orders the pending Workloads itself where that API is
  missing (workloads/queue.py);
- a certificate for its metrics server at the fixed path /etc/kueue/metrics/certs (v0.19 reads
  it from there whenever its own certificate management is off, and exits without it); one is
  issued there once, by the first cluster's CA, if none is there (nothing scrapes it here);
- the namespace kueue-system (its events), and an administrator's kubeconfig.

`stop_process()` / `start_process()` stop and start the controller alone (the webhooks stay
registered, failing closed): the Kueue-outage fault test. `remap(classes)` restarts it with
other DRA classes mapped, as a site does after adding a DRA type (Kueue reads its mappings
only when it starts).
"""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from catalogue.sharing import kueue_device_class_mappings

from ..procs import StackError, free_port, stop
from . import build
from .dra import type_classes

if TYPE_CHECKING:
    from .cluster import ControlPlane

NAMESPACE = "kueue-system"
CONVERTED = ("localqueues", "clusterqueues", "cohorts", "workloads", "multikueueclusters")
# webhook paths of the kinds the portal queues, and of Kueue's own kinds
WEBHOOK_PATHS = ("-kueue-x-k8s-io-", "-batch-v1-job", "-apps-v1-deployment", "--v1-pod",
                 "-jobset-x-k8s-io-v1alpha2-jobset", "-kubeflow-org-v2beta1-mpijob")
FRAMEWORKS = ["batch/job", "pod", "deployment", "jobset.x-k8s.io/jobset", "kubeflow.org/mpijob"]
# an admitted workload has this long to get all its pods Ready before Kueue evicts and requeues
# it (waitForPodsReady): a gang that cannot start whole gives its GPUs back
DEFAULT_PODS_READY_TIMEOUT = 300
QUEUED_ONLY = ("--v1-pod", "-apps-v1-deployment")  # see the module's docstring
QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
# how many objects of each kind Kueue's controllers reconcile at once: the values of Kueue
# v0.19's shipped Configuration (config/components/manager/controller_manager_config.yaml),
# but pods 20 rather than 5. Each notebook's pod is reconciled some three times on its way
# (its Workload made, its PodsReady condition, its gate lifted), each time waiting on the API
# server and on Kueue's own webhooks; five at a time, a burst of 12 launches waited 2.8-3.5 s
# from quota reserved to gate lifted, 20 at a time 1.2-1.9 s (bench/results/notebook_burst.md)
CONTROLLER_CONCURRENCY = (("Job.batch", 5), ("Pod", 20), ("Workload.kueue.x-k8s.io", 10),
                          ("LocalQueue.kueue.x-k8s.io", 5), ("Cohort.kueue.x-k8s.io", 1),
                          ("ClusterQueue.kueue.x-k8s.io", 5),
                          ("ResourceFlavor.kueue.x-k8s.io", 1))


def configuration(*, webhook_port: int, health_port: int,
                  cert_dir: Path, pods_ready_timeout: float = DEFAULT_PODS_READY_TIMEOUT,
                  multikueue: MultiKueueSettings | None = None,
                  device_classes: Sequence[str] | None = None) -> dict[str, Any]:
    """Kueue's Configuration; `device_classes`: the DRA types' classes it maps (by default
    those of the types the DRA addon's pools are for)."""
    config: dict[str, Any] = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
        "namespace": NAMESPACE,
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
        # no metrics server: nothing scrapes it here, and a third port picked as free could be
        # taken before it binds, which stops the manager after its probe already passed
        "metrics": {"bindAddress": build.METRICS_OFF},
        "webhook": {"port": webhook_port, "host": "127.0.0.1", "certDir": str(cert_dir)},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "manageJobsWithoutQueueName": False,
        "integrations": {"frameworks": FRAMEWORKS},
        # as Kueue's own manifests configure it (config/components/manager): without this each
        # of its controllers reconciles one object at a time (controller-runtime's default), and
        # a burst of 12 notebooks waited ~2-3 s after admission for its pods to be ungated one
        # by one (bench/results/notebook_burst.md)
        "controller": {"groupKindConcurrency": dict(CONTROLLER_CONCURRENCY)},
        # requeued from the eviction, after a backoff of about 60 s, 120 s, … (Kueue's
        # defaults); never deactivated; admission of others is not blocked meanwhile
        "waitForPodsReady": {"timeout": f"{pods_ready_timeout:g}s", "blockAdmission": False,
                             "requeuingStrategy": {"timestamp": "Eviction"}},
        "fairSharing": {"preemptionStrategies": ["LessThanOrEqualToFinalShare",
                                                 "LessThanInitialShare"]},
        # DRA: a queued pod's claims (from its ResourceClaimTemplates) count their devices
        # per device class (each DRA type's own), under the resource the tenants' ClusterQueues
        # hold that type's quota in (KueueDRAIntegration, on by default since v0.18)
        "resources": {"deviceClassMappings": kueue_device_class_mappings(
            type_classes() if device_classes is None else device_classes)},
    }
    if multikueue is not None:
        config["multiKueue"] = multikueue.configuration()
    return config


@dataclasses.dataclass(frozen=True)
class MultiKueueSettings:
    """A manager's MultiKueue (its feature gate is on by default since Kueue v0.9; the
    MultiKueueClusters, config and admission check are objects: kube/multikueue.py).

    `origin` labels what this manager makes on its workers, so that its garbage collector
    removes only its own; `worker_lost_timeout`: how long a Workload dispatched to a worker
    that stopped answering stays admitted there before the manager evicts it and dispatches
    it again (Kueue's default is 15 minutes); `gc_interval`: how often orphaned copies on the
    workers are looked for."""

    origin: str = "gpu-portal"
    worker_lost_timeout: float = 900
    gc_interval: float = 60

    def configuration(self) -> dict[str, Any]:
        return {"origin": self.origin, "workerLostTimeout": f"{self.worker_lost_timeout:g}s",
                "gcInterval": f"{self.gc_interval:g}s"}


def webhook_configurations(folder: Path, *, url: str, ca_bundle: str) -> list[dict[str, Any]]:
    """Kueue's webhook configurations, pointed at `url`, only the webhooks the portal needs."""
    docs = []
    manifests = folder / "config" / "components" / "webhook" / "manifests.yaml"
    for doc in yaml.safe_load_all(manifests.read_text()):
        if not doc:
            continue
        kept = []
        for hook in doc.get("webhooks") or []:
            path = hook["clientConfig"]["service"]["path"]
            if not any(part in path for part in WEBHOOK_PATHS):
                continue
            hook["clientConfig"] = {"url": f"{url}{path}", "caBundle": ca_bundle}
            if any(part in path for part in QUEUED_ONLY):
                hook["objectSelector"] = {"matchExpressions": [
                    {"key": QUEUE_NAME_LABEL, "operator": "Exists"}]}
            kept.append(hook)
        doc["webhooks"] = kept
        doc["metadata"]["name"] = f"kueue-{doc['metadata']['name']}"
        docs.append(doc)
    return docs


def custom_resource_definitions(folder: Path, *, url: str, ca_bundle: str
                                ) -> list[dict[str, Any]]:
    docs = []
    for path in sorted((folder / "config" / "components" / "crd" / "bases").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if not doc:
                continue
            if doc["spec"]["names"]["plural"] in CONVERTED:
                doc["spec"]["conversion"] = {"strategy": "Webhook", "webhook": {
                    "clientConfig": {"url": f"{url}/convert", "caBundle": ca_bundle},
                    "conversionReviewVersions": ["v1"]}}
            docs.append(doc)
    return docs


METRICS_CERTS = Path("/etc/kueue/metrics/certs")


def ensure_metrics_certificate(cp: ControlPlane) -> None:
    """The certificate Kueue's metrics server insists on, put in place once (atomically: two
    test processes may start a Kueue at the same moment)."""
    if (METRICS_CERTS / "tls.crt").is_file() and (METRICS_CERTS / "tls.key").is_file():
        return
    try:
        METRICS_CERTS.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".certs.", dir=METRICS_CERTS.parent))
    except OSError as exc:
        raise StackError(f"Kueue needs a metrics certificate at {METRICS_CERTS} and it cannot "
                         f"be written ({exc}): run as root, or create it once") from exc
    cert, key = cp.ca.server_cert("kueue-metrics")
    shutil.copyfile(cert, staging / "tls.crt")
    shutil.copyfile(key, staging / "tls.key")
    try:
        staging.rename(METRICS_CERTS)
    except OSError:  # another process put one there first
        shutil.rmtree(staging, ignore_errors=True)


class Kueue:
    """The Addon."""

    name = "kueue"

    def __init__(self, *, pods_ready_timeout: float = DEFAULT_PODS_READY_TIMEOUT,
                 multikueue: MultiKueueSettings | None = None) -> None:
        self.version = build.COMPONENTS["kueue"].version
        self.pods_ready_timeout = pods_ready_timeout
        self.multikueue = multikueue
        self.proc: subprocess.Popen[bytes] | None = None
        self.cp: ControlPlane | None = None
        self.webhook_port = 0
        self.health_port = 0
        self.health_url = ""
        self.cert_dir = Path()
        self.command: list[str] = []

    def apiserver_args(self, cp: ControlPlane) -> list[str]:
        return []

    def _install(self, cp: ControlPlane, folder: Path) -> None:
        import base64

        ca_bundle = base64.b64encode(cp.ca.pem).decode()
        url = f"https://127.0.0.1:{self.webhook_port}"
        with cp.api_client() as api:
            build.apply_object(api, {"apiVersion": "v1", "kind": "Namespace",
                        "metadata": {"name": NAMESPACE}})
            build.apply_crds(api, custom_resource_definitions(folder, url=url,
                                                              ca_bundle=ca_bundle), what="Kueue")
            for doc in webhook_configurations(folder, url=url, ca_bundle=ca_bundle):
                build.apply_object(api, doc)

    def start(self, cp: ControlPlane) -> None:
        self.cp = cp
        binary = build.ensure("kueue")["kueue"]
        folder = build.module_dir("kueue")
        self.webhook_port = free_port()
        self.health_port = free_port()
        self.health_url = f"http://127.0.0.1:{self.health_port}/readyz"
        self.cert_dir = build.serving_cert_dir(cp, "kueue")
        config = self._write_config()
        ensure_metrics_certificate(cp)
        self._install(cp, folder)
        self.command = [str(binary), f"--config={config}", f"--kubeconfig={cp.admin_kubeconfig}",
                        "--feature-gates=VisibilityOnDemand=false", "--zap-log-level=info"]
        self.start_process()

    def _write_config(self, device_classes: Sequence[str] | None = None) -> Path:
        assert self.cp is not None
        config = self.cp.workdir / "kueue-config.yaml"
        config.write_text(yaml.safe_dump(configuration(
            webhook_port=self.webhook_port, health_port=self.health_port,
            cert_dir=self.cert_dir, pods_ready_timeout=self.pods_ready_timeout,
            multikueue=self.multikueue, device_classes=device_classes), sort_keys=False))
        return config

    def remap(self, device_classes: Sequence[str]) -> None:
        """Kueue restarted with these DRA classes mapped, as a site adds a DRA type's lines to
        its Configuration and restarts Kueue (which reads them only when it starts)."""
        self._write_config(device_classes)
        self.stop_process()
        self.start_process()

    def start_process(self) -> None:
        """Start the controller (again) and wait until its webhooks answer."""
        assert self.cp is not None
        self.proc = build.start_controller(self.cp, "kueue", self.command, self.ready,
                                           env={"NAMESPACE": NAMESPACE})

    def restart_process(self) -> None:
        """Stop the controller and start it again as it was: its webhooks on the same port,
        so that its CRDs stay as they are (a CRD whose conversion webhook's address changes
        has every watch on its kind closed by the API server)."""
        self.stop_process()
        self.start_process()

    def ready(self) -> bool:
        """Its readiness probe passes and its webhook port takes connections."""
        return build.webhook_server_ready(self.health_url, self.webhook_port)

    def stop_process(self) -> None:
        """Stop the controller alone: its webhooks stay registered and fail closed."""
        with contextlib.suppress(Exception):
            stop(self.proc)
        self.proc = None
        time.sleep(0.1)

    def stop(self) -> None:
        self.stop_process()
