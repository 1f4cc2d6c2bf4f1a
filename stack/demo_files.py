"""The demo's file servers: what the kubelet does for a project's file server pod, on loopback.

In a cluster the portal starts a project's file server as a Deployment (files/server.py) and
reaches it by its Service's name. The demo's cluster (kubesim, or KWOK's nodes on the real
control plane) runs no container, so this process, one of the demo's, stands in for the
kubelet of that one kind of pod: it watches the file servers' Deployments and, for each, runs
the real gpu-portal-files (filesd/, built by stack.k8s.build) on a loopback port of its own,
with the pod's flags, the token of the pod's Secret, and a folder per claim the pod mounts
under <root>/<namespace>/ (the demo's volumes, kept under .demo/volumes/ across restarts). A
Deployment deleted (the portal stops idle servers) stops its server.

The portal finds each server in the address file (PORTAL_FILES_ADDRESS_FILE: namespace → URL),
written here once the server answers and rewritten at every change.

    python -m stack.demo_files --root .demo/volumes --addresses .demo/files-addresses.json
"""

from __future__ import annotations

import argparse
import base64
import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .procs import free_port, http_ok, stop, wait_for

log = logging.getLogger("demo-files")


class FileServers:
    """The running servers, by namespace, and the address file that names them."""

    def __init__(self, root: Path, addresses: Path, binary: Path) -> None:
        self.root, self.addresses, self.binary = root, addresses, binary
        self.running: dict[str, tuple[subprocess.Popen[bytes], str, str]] = {}  # proc, url, token
        self._write()

    def _write(self) -> None:
        table = {namespace: url for namespace, (_, url, _) in self.running.items()}
        partial = self.addresses.with_suffix(".partial")
        partial.write_text(json.dumps(table, indent=1, sort_keys=True))
        partial.replace(self.addresses)  # a reader sees the old table or the new one, whole

    def ensure(self, namespace: str, claims: list[str], token: str) -> None:
        """Its server running with these claims' folders and this token (restarted on a new
        token; a new claim is a new folder, which the server serves as it is)."""
        folder = self.root / namespace
        for claim in claims:
            (folder / claim).mkdir(parents=True, exist_ok=True)
        current = self.running.get(namespace)
        if current is not None and current[0].poll() is None and current[2] == token:
            return
        self.stop(namespace)
        port = free_port()
        token_file = self.root / f".{namespace}.token"
        token_file.write_text(token + "\n")
        token_file.chmod(0o600)
        proc = subprocess.Popen([str(self.binary), "--listen", f"127.0.0.1:{port}",
                                 "--root", str(folder), "--token-file", str(token_file)])
        url = f"http://127.0.0.1:{port}"
        wait_for(lambda: http_ok(f"{url}/healthz"), timeout=30, what=f"the file server of "
                 f"{namespace}", proc=proc)
        self.running[namespace] = (proc, url, token)
        self._write()
        log.info("file server of %s at %s (claims: %s)", namespace, url, ", ".join(claims))

    def stop(self, namespace: str) -> None:
        current = self.running.pop(namespace, None)
        if current is not None:
            current[0].send_signal(signal.SIGTERM)  # as the kubelet does: transfers finish
            stop(current[0], timeout=30)
            self._write()
            log.info("file server of %s stopped", namespace)

    def stop_all(self) -> None:
        for namespace in list(self.running):
            self.stop(namespace)


def claims_of(deployment: dict[str, Any]) -> list[str]:
    volumes = deployment["spec"]["template"]["spec"].get("volumes") or []
    return [v["persistentVolumeClaim"]["claimName"] for v in volumes
            if "persistentVolumeClaim" in v]


def token_of(secret: dict[str, Any] | None) -> str | None:
    """The token the pod would read from its Secret (None while there is no Secret)."""
    if secret is None:
        return None
    from files.manifests import TOKEN_KEY

    if (encoded := (secret.get("data") or {}).get(TOKEN_KEY)) is not None:
        return base64.b64decode(encoded).decode().strip()
    value = (secret.get("stringData") or {}).get(TOKEN_KEY)
    return value.strip() if value is not None else None


def serve(servers: FileServers) -> None:
    """List the file servers' Deployments, then follow their changes."""
    from files.manifests import NAME, SELECTOR_TEXT
    from kube.client import Expired, Kube, KubeError

    kube = Kube()

    def apply(deployment: dict[str, Any]) -> None:
        meta = deployment["metadata"]
        namespace = meta["namespace"]
        if meta.get("deletionTimestamp"):
            servers.stop(namespace)
            return
        token = token_of(kube.get("Secret", NAME, namespace))
        if token is not None:  # the portal makes the Secret first: its Deployment comes after
            servers.ensure(namespace, claims_of(deployment), token)

    version = None
    while True:
        try:
            if version is None:
                listed = kube.list("Deployment", label_selector=SELECTOR_TEXT)
                found = {d["metadata"]["namespace"]: d for d in listed.get("items") or []}
                for namespace in set(servers.running) - set(found):
                    servers.stop(namespace)
                for deployment in found.values():
                    apply(deployment)
                version = listed["metadata"]["resourceVersion"]
            for kind, deployment in kube.watch("Deployment", label_selector=SELECTOR_TEXT,
                                               resource_version=version, timeout_seconds=30):
                version = deployment["metadata"].get("resourceVersion") or version
                if kind == "DELETED":
                    servers.stop(deployment["metadata"]["namespace"])
                elif kind in ("ADDED", "MODIFIED"):
                    apply(deployment)
        except Expired:
            version = None
        except KubeError as exc:
            log.warning("the cluster did not answer (%s): listing again", exc)
            version = None
            time.sleep(1.0)  # a cluster restarting: not a tight loop of refusals


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="demo-files", description=__doc__.split("\n")[0])
    parser.add_argument("--root", type=Path, required=True, help="a folder per namespace")
    parser.add_argument("--addresses", type=Path, required=True, help="the address file")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stdout)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    import django

    django.setup()
    from .k8s import build

    args.root.mkdir(parents=True, exist_ok=True)
    servers = FileServers(args.root, args.addresses,
                          build.ensure("portal-files", quiet=True)["gpu-portal-files"])
    # SIGTERM (honcho's, the demo stack's) ends the watch wherever it waits
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print("demo file servers: watching", flush=True)
    try:
        serve(servers)
    except KeyboardInterrupt:
        pass
    finally:
        servers.stop_all()
    return 0


if __name__ == "__main__":
    sys.exit(main())
