"""k8s-keystone-auth as the real control plane's token webhook: `kubectl --token <Keystone token>`.

An addon of stack/k8s/cluster.py's ControlPlane. It runs the webhook of cloud-provider-openstack
(built by stack/k8s/build.py, component "keystone-auth") on a loopback port with a serving
certificate from the cluster's CA, and points the API server at it with
`--authentication-token-webhook-config-file`. It does what deploy/keystone-auth does on a real
cluster: authentication, with deploy/keystone-auth/sync-config.yaml's role mappings (Keystone
role `member` → group `gpu-portal:member`, …; the very file a site mounts). No policy:
authorization stays RBAC (the portal's RoleBindings) and the admission fence of
deploy/base/tenant-admission.yaml. A sync configuration makes it start a Kubernetes client and a
ConfigMap informer over every namespace, and serve only once that has synced: so it runs as the
ServiceAccount kube-system/k8s-keystone-auth of deploy/keystone-auth/rbac.yaml (read ConfigMaps),
applied here as it is, with a token from the TokenRequest API.

What the webhook does with a token (pkg/identity/keystone of cloud-provider-openstack): it asks
Keystone `GET /v3/auth/tokens` with the token as both X-Auth-Token and X-Subject-Token, then
`GET /v3/users/<id>/groups` with the same token. It holds no service credentials of its own;
Keystone's default policy lets a token validate itself and list its own user's groups. A token
without a project scope is refused (401). The TokenReview it answers holds username = Keystone
user name, uid = user id, groups = the user's Keystone group names + the project id + the
mapped groups of the token's roles, and extra
`alpha.kubernetes.io/identity/{roles,project/id,project/name,user/domain/id,user/domain/name}`.
From Keystone it needs only the URL, and the CA that signed Keystone's certificate where Keystone
serves https (`keystone_ca_file`, its --keystone-ca-file).
"""

from __future__ import annotations

import os
import ssl
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from ..procs import REPO, StackError, free_port, stop, wait_for
from . import build

if TYPE_CHECKING:
    from .cluster import ControlPlane

# Settings k8s-keystone-auth also reads from the environment (its config.go): a developer's
# OpenStack shell must not give the test webhook a policy, a sync config or another Keystone.
_ITS_ENVIRONMENT = ("OS_AUTH_URL", "TLS_CERT_FILE", "TLS_PRIVATE_KEY_FILE", "KEYSTONE_CA_FILE",
                    "KEYSTONE_POLICY_FILE", "KEYSTONE_POLICY_CONFIGMAP_NAME",
                    "KEYSTONE_SYNC_CONFIG_FILE", "KEYSTONE_SYNC_CONFIGMAP_NAME",
                    "KEYSTONE_KUBECONFIG_FILE")
START_TIMEOUT = 30.0
DEPLOY = REPO / "deploy" / "keystone-auth"
SYNC_CONFIG = DEPLOY / "sync-config.yaml"
RBAC = DEPLOY / "rbac.yaml"
SERVICE_ACCOUNT = ("kube-system", "k8s-keystone-auth")


class KeystoneAuthWebhook:
    """The Keystone token webhook of one ControlPlane (the Addon protocol of stack/k8s/cluster.py).

    `cache_ttl` is the API server's --authentication-token-webhook-cache-ttl: how long it trusts a
    webhook answer for a token (its default is 2 minutes; short here so that a revoked token stops
    working within seconds in tests). It matches the API server's own 10 s token success cache.
    """

    name = "keystone-auth"

    def __init__(self, keystone_url: str, *, keystone_ca_file: Path | None = None,
                 cache_ttl: str = "10s", binary: Path | None = None) -> None:
        self.keystone_url = keystone_url
        self.keystone_ca_file = keystone_ca_file
        self.cache_ttl = cache_ttl
        self.binary = binary
        self.port = 0
        self.folder: Path | None = None
        self.ca_file: Path | None = None
        self.cert_file: Path | None = None
        self.key_file: Path | None = None
        self.webhook_kubeconfig: Path | None = None
        self.kubeconfig: Path | None = None  # its own identity, to read the ConfigMaps
        self.log_file: Path | None = None
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}/webhook"

    def apiserver_args(self, cp: ControlPlane) -> list[str]:
        """Serving certificate, port and the API server's webhook kubeconfig, made before the API
        server starts (it reads the file once, at start). Called again when the API server is
        restarted: the port stays, since the webhook may be running on it."""
        self.folder = Path(cp.workdir) / "keystone-auth"
        self.folder.mkdir(parents=True, exist_ok=True)
        self.port = self.port or free_port()
        self.ca_file = Path(cp.ca.cert_file)
        self.cert_file, self.key_file = cp.ca.server_cert("keystone-auth", ("127.0.0.1",))
        self.webhook_kubeconfig = self.folder / "webhook-kubeconfig.yaml"
        self.webhook_kubeconfig.write_text(yaml.safe_dump(webhook_kubeconfig(self.url, self.ca_file)))
        return [f"--authentication-token-webhook-config-file={self.webhook_kubeconfig}",
                # the only TokenReview version k8s-keystone-auth answers (also the default)
                "--authentication-token-webhook-version=v1beta1",
                f"--authentication-token-webhook-cache-ttl={self.cache_ttl}"]

    def command(self) -> list[str]:
        binary = self.binary or build.ensure("keystone-auth", quiet=True)["k8s-keystone-auth"]
        cmd = [str(binary),
               f"--keystone-url={self.keystone_url}",
               f"--listen=127.0.0.1:{self.port}",
               f"--tls-cert-file={self.cert_file}",
               f"--tls-private-key-file={self.key_file}",
               # the role mappings (no namespace or RoleBinding sync); no
               # --keystone-policy-file / --policy-configmap-name: RBAC authorizes
               f"--sync-config-file={SYNC_CONFIG}",
               f"--kubeconfig={self.kubeconfig}",
               ]
        if self.keystone_ca_file is not None:
            cmd.append(f"--keystone-ca-file={self.keystone_ca_file}")
        return cmd

    def start(self, cp: ControlPlane) -> None:
        if self.webhook_kubeconfig is None or self.folder is None:
            raise StackError("keystone-auth: apiserver_args() must run before start()")
        if self.proc is not None and self.proc.poll() is None:
            return
        cp.kubectl("apply", "-f", str(RBAC))
        self.kubeconfig = cp.service_account_kubeconfig(
            self.folder / "kubeconfig", *SERVICE_ACCOUNT)
        logs = Path(cp.workdir) / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        self.log_file = logs / "keystone-auth.log"
        env = {k: v for k, v in os.environ.items() if k not in _ITS_ENVIRONMENT}
        with open(self.log_file, "ab") as log:
            self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, env=env)
        try:
            wait_for(self.answers, timeout=START_TIMEOUT, interval=0.1, proc=self.proc,
                     what=f"k8s-keystone-auth on 127.0.0.1:{self.port} (log: {self.log_file})")
        except StackError as exc:
            self.stop()
            raise StackError(f"{exc}\n{self._log_tail()}") from exc

    def answers(self) -> bool:
        """Whether it serves https with the certificate the API server expects. A GET carries
        no TokenReview, so it answers an error status without asking Keystone."""
        context = ssl.create_default_context(cafile=str(self.ca_file))
        try:
            with urllib.request.urlopen(self.url, timeout=1, context=context):
                return True
        except urllib.error.HTTPError:
            return True
        except (urllib.error.URLError, OSError):
            return False

    def stop(self) -> None:
        stop(self.proc)
        self.proc = None

    def _log_tail(self) -> str:
        if self.log_file is None or not self.log_file.exists():
            return ""
        return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-15:])


def webhook_kubeconfig(url: str, ca_file: Path) -> dict[str, Any]:
    """The API server's view of the webhook (same shape as deploy/keystone-auth/apiserver/):
    its https URL and the CA to check it with; no client credentials, the webhook asks none."""
    return {
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "keystone-auth",
                      "cluster": {"server": url, "certificate-authority": str(ca_file)}}],
        "users": [{"name": "kube-apiserver", "user": {}}],
        "contexts": [{"name": "keystone-auth",
                      "context": {"cluster": "keystone-auth", "user": "kube-apiserver"}}],
        "current-context": "keystone-auth",
    }
