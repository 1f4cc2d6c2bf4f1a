"""JobSet for the real control plane: its controller manager, run out of cluster, as an addon.

JobSet (sigs.k8s.io/jobset, built by stack/k8s/build.py as `jobset`) runs a group of Jobs as one
workload (jobset.x-k8s.io/v1alpha2 JobSet: replicated Jobs, a headless Service for their pods'
names, success and failure policies, restarts of the whole group); Kueue admits a JobSet whole
(its `jobset.x-k8s.io/jobset` integration, stack/k8s/kueue.py). What running it outside a
cluster takes (read from its main.go, pkg/config and config/components):

- its CRD (config/components/crd/bases in the module, read from the Go module cache, not copied
  here). Its kustomization adds a conversion webhook, but the CRD has one version (v1alpha2),
  so nothing is ever converted and none is configured;
- its Mutating/ValidatingWebhookConfigurations (config/components/webhook/manifests.yaml, with
  its patches/: the pod webhooks only see pods that carry `jobset.sigs.k8s.io/jobset-name`),
  pointed at https://127.0.0.1:<port> with this cluster's CA; renamed `jobset-…` (upstream's
  names are kubebuilder's defaults, as Kueue's are);
- a Configuration (config.jobset.x-k8s.io/v1alpha1): leader election off, its internal
  certificate management off (the webhook's serving certificate comes from the cluster's CA,
  `webhook.certDir`; its metrics server, HTTPS, reads the same folder: with its certificate
  management off it would read /tmp/k8s-metrics-server/serving-certs), health and metrics on
  free loopback ports;
- an administrator's kubeconfig, as Kueue: the tenant guard (deploy/base/tenant-admission.yaml)
  lets cluster admins create the GPU Jobs a JobSet is made of in a queued namespace.
"""

from __future__ import annotations

import base64
import contextlib
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from ..procs import free_port, stop
from . import build

if TYPE_CHECKING:
    from .cluster import ControlPlane

GROUP = "jobset.x-k8s.io"


def configuration(*, webhook_port: int, health_port: int,
                  cert_dir: Path) -> dict[str, Any]:
    return {
        "apiVersion": "config.jobset.x-k8s.io/v1alpha1", "kind": "Configuration",
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
        # no metrics server: nothing scrapes it here, and a third port picked as free could be
        # taken before it binds, which stops the manager after its probe already passed
        "metrics": {"bindAddress": build.METRICS_OFF},
        "webhook": {"port": webhook_port, "host": "127.0.0.1", "certDir": str(cert_dir)},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
    }


def webhook_configurations(folder: Path, *, url: str, ca_bundle: str) -> list[dict[str, Any]]:
    """JobSet's webhook configurations with its kustomization's patches, pointed at `url`."""
    webhook = folder / "config" / "components" / "webhook"
    patches = {"MutatingWebhookConfiguration": "mutating-patch.yaml",
               "ValidatingWebhookConfiguration": "validating-patch.yaml"}
    docs = []
    for doc in yaml.safe_load_all((webhook / "manifests.yaml").read_text()):
        if not doc:
            continue
        for op in yaml.safe_load((webhook / "patches" / patches[doc["kind"]]).read_text()):
            assert op["op"] == "replace" and op["path"].startswith("/webhooks/"), op
            doc["webhooks"][int(op["path"].rsplit("/", 1)[1])] = op["value"]
        for hook in doc["webhooks"]:
            hook["clientConfig"] = {"url": f"{url}{hook['clientConfig']['service']['path']}",
                                    "caBundle": ca_bundle}
        doc["metadata"]["name"] = f"jobset-{doc['metadata']['name']}"
        docs.append(doc)
    return docs


def custom_resource_definitions(folder: Path) -> list[dict[str, Any]]:
    bases = folder / "config" / "components" / "crd" / "bases"
    return [doc for path in sorted(bases.glob("*.yaml"))
            for doc in yaml.safe_load_all(path.read_text()) if doc]


class JobSet:
    """The Addon."""

    name = "jobset"

    def __init__(self) -> None:
        self.version = build.COMPONENTS["jobset"].version
        self.proc: subprocess.Popen[bytes] | None = None
        self.webhook_port = 0
        self.health_url = ""
        self.cp: ControlPlane | None = None
        self.command: list[str] = []

    def apiserver_args(self, cp: ControlPlane) -> list[str]:
        return []

    def start(self, cp: ControlPlane) -> None:
        binary = build.ensure("jobset")["jobset"]
        folder = build.module_dir("jobset")
        self.webhook_port = free_port()
        health_port = free_port()
        self.health_url = f"http://127.0.0.1:{health_port}/readyz"
        cert_dir = build.serving_cert_dir(cp, "jobset")
        config = cp.workdir / "jobset-config.yaml"
        config.write_text(yaml.safe_dump(configuration(
            webhook_port=self.webhook_port, health_port=health_port,
            cert_dir=cert_dir), sort_keys=False))
        ca_bundle = base64.b64encode(cp.ca.pem).decode()
        with cp.api_client() as api:
            build.apply_crds(api, custom_resource_definitions(folder), what="JobSet")
            for doc in webhook_configurations(folder, url=f"https://127.0.0.1:{self.webhook_port}",
                                              ca_bundle=ca_bundle):
                build.apply_object(api, doc)
        self.cp = cp
        self.command = [str(binary), f"--config={config}", f"--kubeconfig={cp.admin_kubeconfig}",
                        "--zap-log-level=info", "--zap-devel=false"]
        self.proc = build.start_controller(cp, "jobset", self.command, self.ready)

    def restart_process(self) -> None:
        """Stop the controller and start it again as it was (its webhook on the same port:
        the webhook configurations stay as they are)."""
        assert self.cp is not None
        with contextlib.suppress(Exception):
            stop(self.proc)
        self.proc = build.start_controller(self.cp, "jobset", self.command, self.ready)

    def ready(self) -> bool:
        """Its readiness probe (certificates loaded, webhook server started) passes and its
        webhook port takes connections."""
        return build.webhook_server_ready(self.health_url, self.webhook_port)

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            stop(self.proc)
        self.proc = None
