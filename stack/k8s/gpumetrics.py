"""GPU metrics for the real control plane's simulated GPU nodes: the project's own agent, per node.

On a real GPU node the agent (gpuagent/, a DaemonSet) reads NVML and asks the kubelet's
pod-resources socket which pod holds each GPU. KWOK's nodes have neither, so for every node of
the inventory that has GPUs this addon runs

- a `PodResourcesServer` (stack/k8s/podresources.py): the node's pod-resources socket, fed by a
  watch of the node's pods under the node's own identity, and the node file of what runs on
  each GPU;
- `python -m gpuagent --fake-node <node file> --pod-resources-socket <socket>` on a free
  loopback port: the agent as it runs on a node, with the fake NVML reading the node file.

`urls` lists the agents' /metrics. Endpoints cannot hold loopback addresses, so the portal finds
them through `PORTAL_GPU_EXPORTER_URLS` rather than the exporter Service.
"""

from __future__ import annotations

import contextlib
import functools
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from ..procs import REPO, StackError, free_port, http_ok, stop, wait_for
from .podresources import PodResourcesServer

if TYPE_CHECKING:
    from kubernetes.client import ApiClient

    from kubesim.inventory import Inventory, NodeSpec

    from .cluster import ControlPlane

DEMO_INVENTORY = REPO / "deploy" / "kubesim" / "demo-inventory.yaml"
SOCKET_PATH_MAX = 100  # a unix socket's path must fit in 108 bytes


class GpuMetrics:
    """The Addon: one fake pod-resources socket and one gpuagent per GPU node."""

    name = "gpumetrics"

    def __init__(self, inventory: Inventory | Path | str = DEMO_INVENTORY, *,
                 interval: float = 1.0) -> None:
        self.inventory = inventory
        self.interval = interval
        self.urls: list[str] = []
        self.servers: dict[str, PodResourcesServer] = {}  # node name → its socket
        self.agents: dict[str, subprocess.Popen[bytes]] = {}
        self._apis: list[ApiClient] = []
        self._socket_dir: Path | None = None

    def _inventory(self) -> Inventory:
        from kubesim.inventory import Inventory, load_inventory

        if isinstance(self.inventory, Inventory):
            return self.inventory
        return load_inventory(str(self.inventory))

    def apiserver_args(self, cp: ControlPlane) -> list[str]:
        return []

    def _node_api(self, cp: ControlPlane, node: str) -> ApiClient:
        """A client under the node's identity, as its kubelet would have."""
        from kubernetes import client

        cert, key = cp.ca.client_cert(f"kubelet-{node}", f"system:node:{node}", ("system:nodes",))
        config = client.Configuration()
        config.host = cp.url
        config.ssl_ca_cert = str(cp.ca.cert_file)
        config.cert_file, config.key_file = str(cert), str(key)
        api = client.ApiClient(config)
        self._apis.append(api)
        return api

    def _sockets(self, cp: ControlPlane) -> Path:
        folder = cp.workdir / "gpumetrics"
        if len(str(folder / "gpu-node-name-of-usual-length" / "kubelet.sock")) > SOCKET_PATH_MAX:
            folder = Path(tempfile.mkdtemp(prefix="gpumetrics-"))  # the workdir's path is long
            self._socket_dir = folder
        return folder

    def start(self, cp: ControlPlane) -> None:
        from kubesim.inventory import node_devices

        nodes: list[NodeSpec] = [n for n in self._inventory().nodes if node_devices(n)]
        files = cp.workdir / "gpumetrics"
        sockets = self._sockets(cp)
        logs = cp.workdir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        try:
            for spec in nodes:
                server = PodResourcesServer(
                    spec, api=self._node_api(cp, spec.name),
                    socket_path=sockets / spec.name / "kubelet.sock",
                    node_file=files / spec.name / "node.json")
                self.servers[spec.name] = server.start()
                port = free_port()
                with open(logs / f"gpuagent-{spec.name}.log", "ab") as log:
                    self.agents[spec.name] = subprocess.Popen(
                        [sys.executable, "-m", "gpuagent", "--fake-node", str(server.node_file),
                         "--hostname", spec.name,
                         "--pod-resources-socket", str(server.socket_path),
                         "--host", "127.0.0.1", "--port", str(port),
                         "--interval", str(self.interval)],
                        stdout=log, stderr=subprocess.STDOUT, cwd=REPO, start_new_session=True)
                self.urls.append(f"http://127.0.0.1:{port}/metrics")
            for (node, agent), url in zip(self.agents.items(), self.urls, strict=True):
                health = url.removesuffix("/metrics") + "/healthz"
                try:
                    wait_for(functools.partial(http_ok, health), timeout=30,
                             what=f"gpuagent of {node}", proc=agent)
                except StackError as exc:
                    tail = (logs / f"gpuagent-{node}.log").read_text(errors="replace")[-2000:]
                    raise StackError(f"{exc}\n{tail}") from None
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        for agent in self.agents.values():  # all at once: each takes a moment to wind down
            if agent.poll() is None:
                agent.terminate()
        for server in self.servers.values():
            server.stop()
        self.servers.clear()
        for agent in self.agents.values():
            stop(agent)
        self.agents.clear()
        for api in self._apis:
            with contextlib.suppress(Exception):
                api.close()
        self._apis.clear()
        self.urls = []
        if self._socket_dir is not None:
            shutil.rmtree(self._socket_dir, ignore_errors=True)
            self._socket_dir = None
