"""LoadBalancer addresses for the real control plane: MetalLB's own controller, run out of cluster.

MetalLB's controller (go.universe.tf/metallb/controller, built by stack/k8s/build.py as
`metallb-controller`) is the part that assigns Services of type LoadBalancer an address from an
IPAddressPool (metallb.io/v1beta1), honours `metallb.io/address-pool`, `loadBalancerIPs` and
`allow-shared-ip`, and records the events IPAllocated / AllocationFailed. Its speakers announce
those addresses on the network (ARP or BGP); on loopback there is no network to announce on, so
none runs. The L2Advertisement is created all the same, as an installation has one.

Version: v0.15.2. The newest, v0.16.2, cannot be built from the Go module proxy: it requires
github.com/metallb/frr-k8s v0.0.27, which the proxy refuses (403 "not available"), and the
v0.0.26 it serves lacks types v0.16.2 compiles against. v0.15.2's dependencies are all served.

What running it outside a cluster takes (read from its sources):

- `--kubeconfig` (controller-runtime's flag) and `--namespace` (else it reads the pod's
  service-account namespace file, which a host process has not);
- `--webhook-mode=disabled`: the webhooks only validate MetalLB's own objects, and serving them
  needs a Service in front of a pod network; with them off, no certificate is rotated either;
- `--port`: its /metrics (plain HTTP, on every interface: v0.15.2 has no flag for the host),
  on a free port; it answers once the controller's listeners started;
- no memberlist: that is the speakers' (no `--ml-secret-name`).
(v0.16.2 would also GET its own Pod, `--pod-name`, to own its ConfigurationState.)

Identity: the ServiceAccount metallb-system/controller with MetalLB's own RBAC for its controller
(config/rbac/role.yaml in the module), and a TokenRequest token: the least privilege upstream
gives it, not an administrator's certificate.

MetalLB's CRDs, namespace and RBAC are read from the Go module cache (`build.module_dir`:
`go mod download -json go.universe.tf/metallb@<version>`), not copied into this repository.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from ..procs import REPO, StackError, free_port, http_ok, stop, wait_for
from . import build

if TYPE_CHECKING:
    from kubesim.inventory import AddressPoolSpec, Inventory

    from .cluster import ControlPlane

DEMO_INVENTORY = REPO / "deploy" / "kubesim" / "demo-inventory.yaml"
NAMESPACE = "metallb-system"
SERVICE_ACCOUNT = "controller"
# the controller's objects in MetalLB's config/rbac/role.yaml (the speaker's are left out)
CONTROLLER_RBAC = {("ClusterRole", "metallb-system:controller"),
                   ("ClusterRoleBinding", "metallb-system:controller"),
                   ("Role", "controller"), ("RoleBinding", "controller"),
                   ("Role", "pod-lister"), ("RoleBinding", "pod-lister")}
TOKEN_SECONDS = 7 * 24 * 3600
L2_ADVERTISEMENT = "gpu-portal"


def address_pool(pool: AddressPoolSpec, namespace: str = NAMESPACE) -> dict[str, Any]:
    return {"apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
            "metadata": {"name": pool.name, "namespace": namespace},
            "spec": {"addresses": list(pool.addresses), "autoAssign": pool.auto_assign}}


def l2_advertisement(pools: list[str], namespace: str = NAMESPACE) -> dict[str, Any]:
    return {"apiVersion": "metallb.io/v1beta1", "kind": "L2Advertisement",
            "metadata": {"name": L2_ADVERTISEMENT, "namespace": namespace},
            "spec": {"ipAddressPools": pools}}


class MetalLB:
    """The Addon. `pools`: an inventory file, an Inventory, or its `address_pools`."""

    name = "metallb"

    def __init__(self, pools: Mapping[str, AddressPoolSpec] | Inventory | Path | str
                 = DEMO_INVENTORY, *, namespace: str = NAMESPACE) -> None:
        self.pools_source = pools
        self.namespace = namespace
        self.version = build.COMPONENTS["metallb"].version
        self.proc: subprocess.Popen[bytes] | None = None
        self.metrics_url = ""
        self.kubeconfig: Path | None = None

    def pools(self) -> dict[str, AddressPoolSpec]:
        from kubesim.inventory import Inventory, load_inventory

        source = self.pools_source
        if isinstance(source, (str, Path)):
            source = load_inventory(str(source))
        if isinstance(source, Inventory):
            return dict(source.address_pools)
        return dict(source)

    def apiserver_args(self, cp: ControlPlane) -> list[str]:
        return []

    # --- objects ----------------------------------------------------------------------------

    def _crds(self, api: Any, folder: Path) -> None:
        from kubernetes import client

        names = []
        for path in sorted((folder / "config" / "crd" / "bases").glob("*.yaml")):
            for doc in yaml.safe_load_all(path.read_text()):
                if doc:
                    build.apply_object(api, doc)
                    names.append(doc["metadata"]["name"])
        extensions = client.ApiextensionsV1Api(api)

        def established() -> bool:
            for name in names:
                status = extensions.read_custom_resource_definition(name).status
                conditions = status.conditions if status is not None else None
                if not any(c.type == "Established" and c.status == "True"
                           for c in conditions or ()):
                    return False
            return True

        wait_for(established, timeout=30, what="MetalLB's CRDs established", interval=0.2)

    def _rbac(self, api: Any, folder: Path) -> None:
        for path in (folder / "config" / "rbac" / "service-accounts.yaml",
                     folder / "config" / "rbac" / "role.yaml"):
            for doc in yaml.safe_load_all(path.read_text()):
                if not doc:
                    continue
                kind, name = doc["kind"], doc["metadata"]["name"]
                if kind == "ServiceAccount":
                    if name != SERVICE_ACCOUNT:
                        continue
                elif (kind, name) not in CONTROLLER_RBAC:
                    continue
                if kind in ("ServiceAccount", "Role", "RoleBinding"):
                    doc["metadata"]["namespace"] = self.namespace
                if "subjects" in doc:
                    doc["subjects"] = [{**s, "namespace": self.namespace}
                                       for s in doc["subjects"] if s["name"] == SERVICE_ACCOUNT]
                build.apply_object(api, doc)

    def _write_kubeconfig(self, cp: ControlPlane, token: str) -> Path:
        user = f"system:serviceaccount:{self.namespace}:{SERVICE_ACCOUNT}"
        path = cp.workdir / "metallb-controller.kubeconfig"
        path.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": "gpu-portal", "cluster": {
                "server": cp.url, "certificate-authority": str(cp.ca.cert_file)}}],
            "users": [{"name": user, "user": {"token": token}}],
            "contexts": [{"name": user, "context": {"cluster": "gpu-portal", "user": user}}],
            "current-context": user,
        }, sort_keys=False))
        path.chmod(0o600)
        return path

    # --- life cycle -------------------------------------------------------------------------

    def start(self, cp: ControlPlane) -> None:
        from kubernetes import client

        binary = build.ensure("metallb")["metallb-controller"]
        folder = build.module_dir("metallb")
        pools = self.pools()
        with cp.api_client() as api:
            self._crds(api, folder)
            namespace = next(d for d in yaml.safe_load_all(
                (folder / "config" / "native" / "ns.yaml").read_text()) if d)
            namespace["metadata"]["name"] = self.namespace
            build.apply_object(api, namespace)
            self._rbac(api, folder)
            for pool in pools.values():
                build.apply_object(api, address_pool(pool, self.namespace))
            build.apply_object(api, l2_advertisement(sorted(pools), self.namespace))
            self.kubeconfig = self._write_kubeconfig(cp, build.service_account_token(
                api, self.namespace, SERVICE_ACCOUNT, TOKEN_SECONDS))
        metrics_port = free_port()
        self.metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"
        log_path = cp.workdir / "logs" / "metallb-controller.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [str(binary), f"--kubeconfig={self.kubeconfig}", f"--namespace={self.namespace}",
                 "--webhook-mode=disabled", f"--port={metrics_port}", "--log-level=info"],
                stdout=log, stderr=subprocess.STDOUT, cwd=cp.workdir, start_new_session=True)

        def pools_loaded() -> bool:
            # the controller writes each pool's status once it has read it
            with cp.api_client() as api:
                answer = client.CustomObjectsApi(api).list_namespaced_custom_object(
                    "metallb.io", "v1beta1", self.namespace, "ipaddresspools")
            assert isinstance(answer, dict)  # the list's JSON (the client types it `object`)
            objects = answer["items"]
            loaded = {o["metadata"]["name"] for o in objects if "availableIPv4" in
                      (o.get("status") or {})}
            return http_ok(self.metrics_url) and loaded >= set(pools)

        try:
            wait_for(pools_loaded, timeout=60, what="metallb-controller", proc=self.proc,
                     interval=0.2)
        except StackError as exc:
            self.stop()
            tail = log_path.read_text(errors="replace")[-3000:]
            raise StackError(f"{exc}\n{tail}") from None

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            stop(self.proc)
        self.proc = None
