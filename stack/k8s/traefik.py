"""The shared gateway of PORTAL_SERVICE_EXPOSURE=shared: Traefik with its Kubernetes Ingress
provider, run out of cluster against the real control plane.

One LoadBalancer address for every service workload: the gateway's Service (`gateway` in
`gpu-portal-gateway`, type LoadBalancer) takes one address of MetalLB's pool, and Traefik
routes each workload's host name (`w-<id>.<domain>`, the portal's Ingress of class
`gpu-portal`) to that workload's Service, its authenticating proxy. On a site the same runs in
the cluster (docs/operator-guide.md); here the process listens on loopback.

Traefik (built by stack/k8s/build.py as `traefik`, v3.6.12) reads Ingresses, IngressClasses,
Services and EndpointSlices (and, as every Ingress controller does for TLS, Secrets) as the
ServiceAccount gpu-portal-gateway/traefik, bound to the ClusterRole Traefik's documentation
gives its Ingress provider, with a TokenRequest token: `providers.kubernetesIngress.endpoint`,
`token` (a file) and `certAuthFilePath` are its out-of-cluster client. It writes the gateway's
address into each Ingress' status (`ingressEndpoint.publishedService`).

Traefik sends a request to the addresses of the backend Service's EndpointSlices. KWOK's pods
have made-up addresses that nothing answers at (and that this machine must not send traffic
to); the API server refuses loopback addresses in an EndpointSlice. A test that wants the real
data path to a process on loopback gives `loopback_names`: names Traefik alone resolves to
127.0.0.1 (its own /etc/hosts, bind-mounted in a mount namespace of its own: `unshare`, as
root), for EndpointSlices of address type FQDN.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from ..procs import StackError, free_port, http_ok, is_root, stop, wait_for
from . import build

if TYPE_CHECKING:
    from .cluster import ControlPlane

NAMESPACE = "gpu-portal-gateway"
SERVICE_ACCOUNT = "traefik"
SERVICE = "gateway"
INGRESS_CLASS = "gpu-portal"
CONTROLLER = "traefik.io/ingress-controller"  # the controller name Traefik answers for
TOKEN_SECONDS = 7 * 24 * 3600

# Traefik's own RBAC for its Ingress provider (docs/content/reference/dynamic-configuration/
# kubernetes-crd-rbac.yml in the module, less its CRDs' and OpenTelemetry's rules)
CLUSTER_ROLE_RULES = [
    {"apiGroups": [""], "resources": ["services", "secrets", "nodes"],
     "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"],
     "verbs": ["list", "watch"]},
    {"apiGroups": ["networking.k8s.io"], "resources": ["ingresses", "ingressclasses"],
     "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["networking.k8s.io"], "resources": ["ingresses/status"],
     "verbs": ["update"]},
]


def gateway_objects(namespace: str = NAMESPACE, ingress_class: str = INGRESS_CLASS,
                    address_pool: str | None = None) -> list[dict[str, Any]]:
    """What the gateway needs in the cluster: its namespace, identity and rights, its
    IngressClass, and its LoadBalancer Service (no selector: the process is not a pod here;
    on a site it selects Traefik's pods)."""
    service_annotations = {"metallb.io/address-pool": address_pool} if address_pool else {}
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": SERVICE_ACCOUNT, "namespace": namespace}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": {"name": f"{namespace}:traefik"}, "rules": CLUSTER_ROLE_RULES},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": f"{namespace}:traefik"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                     "name": f"{namespace}:traefik"},
         "subjects": [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT,
                       "namespace": namespace}]},
        {"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass",
         "metadata": {"name": ingress_class}, "spec": {"controller": CONTROLLER}},
        {"apiVersion": "v1", "kind": "Service",
         "metadata": {"name": SERVICE, "namespace": namespace,
                      "annotations": service_annotations},
         "spec": {"type": "LoadBalancer", "allocateLoadBalancerNodePorts": False,
                  "ports": [{"name": "web", "protocol": "TCP", "port": 80}]}},
    ]


class Traefik:
    """The Addon. `address_pool`: the MetalLB pool its Service takes its address from."""

    name = "traefik"

    def __init__(self, *, namespace: str = NAMESPACE, ingress_class: str = INGRESS_CLASS,
                 address_pool: str | None = None,
                 loopback_names: tuple[str, ...] = ()) -> None:
        self.namespace = namespace
        self.ingress_class = ingress_class
        self.address_pool = address_pool
        self.loopback_names = tuple(loopback_names)
        self.version = build.COMPONENTS["traefik"].version
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0  # where it serves the workloads' host names
        self.url = ""
        self.api_url = ""  # its own API: /api/http/routers, /api/http/services

    def apiserver_args(self, cp: ControlPlane) -> list[str]:
        return []

    def _config(self, cp: ControlPlane, token_file: Path, ping_port: int) -> dict[str, Any]:
        return {
            # "traefik": its ping and its read-only API (what it routes where), on loopback
            "entryPoints": {"web": {"address": f"127.0.0.1:{self.port}"},
                            "traefik": {"address": f"127.0.0.1:{ping_port}"}},
            "ping": {},
            "api": {"insecure": True, "dashboard": False},
            "log": {"level": "INFO"},
            "global": {"checkNewVersion": False, "sendAnonymousUsage": False},
            "providers": {"kubernetesIngress": {
                "endpoint": cp.url, "token": str(token_file),
                "certAuthFilePath": str(cp.ca.cert_file),
                "ingressClass": self.ingress_class,
                "throttleDuration": "0s",
                "ingressEndpoint": {"publishedService": f"{self.namespace}/{SERVICE}"},
            }},
        }

    def _command(self, binary: Path, config: Path, workdir: Path) -> list[str]:
        command = [str(binary), f"--configFile={config}"]
        if not self.loopback_names:
            return command
        if not is_root():
            raise StackError("the gateway's loopback names need a mount namespace of its own "
                             "(unshare, as root)")
        hosts = workdir / "traefik-hosts"
        hosts.write_text("127.0.0.1 localhost\n" + "".join(
            f"127.0.0.1 {name}\n" for name in self.loopback_names))
        return ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                f'mount --bind "{hosts}" /etc/hosts && exec "$@"', "traefik", *command]

    def start(self, cp: ControlPlane) -> None:
        binary = build.ensure("traefik")["traefik"]
        with cp.api_client() as api:
            for obj in gateway_objects(self.namespace, self.ingress_class, self.address_pool):
                build.apply_object(api, obj)
            token = build.service_account_token(api, self.namespace, SERVICE_ACCOUNT,
                                                TOKEN_SECONDS)
        token_file = cp.workdir / "traefik.token"
        token_file.write_text(token)
        token_file.chmod(0o600)
        self.port, ping_port = free_port(), free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.api_url = f"http://127.0.0.1:{ping_port}/api"
        config = cp.workdir / "traefik.yaml"
        config.write_text(yaml.safe_dump(self._config(cp, token_file, ping_port),
                                         sort_keys=False))
        config.chmod(0o600)
        log_path = cp.workdir / "logs" / "traefik.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "ab") as log:
            self.proc = subprocess.Popen(self._command(binary, config, cp.workdir), stdout=log,
                                         stderr=subprocess.STDOUT, cwd=cp.workdir,
                                         start_new_session=True)
        try:
            wait_for(lambda: http_ok(f"http://127.0.0.1:{ping_port}/ping"), timeout=60,
                     what="traefik", proc=self.proc, interval=0.2)
        except StackError as exc:
            self.stop()
            tail = log_path.read_text(errors="replace")[-3000:]
            raise StackError(f"{exc}\n{tail}") from None

    def servers(self) -> dict[str, list[str]]:
        """What it sends each of its HTTP services to now (its API): name → server URLs."""
        with urllib.request.urlopen(f"{self.api_url}/http/services", timeout=5) as answer:
            services = json.load(answer)
        return {s["name"]: [server["url"] for server in
                            (s.get("loadBalancer") or {}).get("servers") or ()]
                for s in services}

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            stop(self.proc)
        self.proc = None
