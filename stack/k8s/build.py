"""Build the real cluster's Go components from the Go module proxy, once, into a cache outside the clone.

Each component is a small wrapper module under stack/k8s/<name>/ (go.mod, go.sum and a main or a
tools.go naming the upstream command): no upstream code lives in this repository. Two are our own
programs in folders of their own (portal-sshd: the repository's sshd/; portal-files: filesd/), and
one is our own program in a wrapper module of its own (provisioner); the S3 server of the tests
(versitygw) has its wrapper at stack/versitygw, the container registry of the tests
(distribution) at stack/distribution. Binaries go to

    $GPU_PORTAL_CACHE (default ~/.cache/gpu-portal)/k8s/<name>-<version>-<hash>/bin/

where <hash> covers the wrapper's files and the build flags, so a change of pins builds anew and
anything else reuses what is there.

The wrappers select one version of each module they share (tests/test_go_wrappers.py checks it):
their go.mod raises the indirect requirements to the newest version any wrapper needs. Go's build
cache keys a compiled package by its source and its dependencies' compiled outputs, so a fresh
machine compiles a shared package once for the whole set only when every wrapper builds it, and
everything below it, at the same versions. Kubernetes' libraries come in two lines: 1.37 for the
control plane and our provisioner, 1.36 for the addons (Kueue v0.19 does not compile against
1.37); MetalLB keeps its own pins (tests/test_go_wrappers.py says why). A build runs in a temporary folder beside it and is renamed
into place only when every binary of the component built: an interrupted or failed build leaves
nothing that looks complete; a component builds under a lock of its own in the cache (one file per
component and version), so two processes never build it both: the second waits for the first's
result.

On a fresh machine the builds take longer than the tests that need none of them, so `make test`
(and `make lint`, which CI runs first on the same machine) starts them in the background at once,
niced, in the order the tests need them (NEED_ORDER); a test that needs one waits for it
(tests/fixtures/builds.py), and the tests of the real control planes run last
(tests/fixtures/scheduling.py).

    python -m stack.k8s.build              # every component, in the foreground
    python -m stack.k8s.build kubernetes etcd
    python -m stack.k8s.build --background # every component, in a niced process of its own
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..procs import StackError

if TYPE_CHECKING:
    from kubernetes.client import ApiClient

    from .cluster import ControlPlane

HERE = Path(__file__).resolve().parent
KUBERNETES_VERSION = "v1.37.2"
KUBERNETES_BUILD_DATE = "2026-10-27T12:01:04Z"  # the tag's date on the module proxy


def cache_root() -> Path:
    return Path(os.environ.get("GPU_PORTAL_CACHE") or Path.home() / ".cache" / "gpu-portal")


def _version_ldflags(version: str) -> str:
    """What upstream's hack/lib/version.sh sets, so /version reports the real version."""
    major, minor = version.lstrip("v").split(".")[:2]
    flags = []
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [f"-X {pkg}.gitVersion={version}", f"-X {pkg}.gitMajor={major}",
                  f"-X {pkg}.gitMinor={minor}", f"-X {pkg}.gitTreeState=clean",
                  f"-X {pkg}.buildDate={KUBERNETES_BUILD_DATE}"]
    return " ".join(flags)


@dataclasses.dataclass(frozen=True)
class Component:
    name: str                    # the wrapper module's folder under stack/k8s/
    version: str                 # the upstream version its go.mod pins (for names and messages)
    module: str                  # the upstream module, for messages
    binaries: dict[str, str]     # binary name → Go package to build ("." = the wrapper's main)
    ldflags: str = ""
    tags: str = ""
    cgo: bool = False
    folder: Path | None = None   # the module's folder when not stack/k8s/<name> (our own code)

    @property
    def source(self) -> Path:
        return self.folder or HERE / self.name

    def fingerprint(self) -> str:
        """Over every file of the module's folder, subfolders (Go packages) included."""
        digest = hashlib.sha256()
        for path in sorted(self.source.rglob("*")):
            if path.is_file():
                name = path.relative_to(self.source).as_posix()
                digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
        digest.update(repr((self.binaries, self.ldflags, self.tags, self.cgo)).encode())
        return digest.hexdigest()[:12]

    @property
    def bin_dir(self) -> Path:
        return cache_root() / "k8s" / f"{self.name}-{self.version}-{self.fingerprint()}" / "bin"

    def built(self) -> bool:
        return all((self.bin_dir / b).is_file() for b in self.binaries)


COMPONENTS: dict[str, Component] = {c.name: c for c in (
    Component(
        name="kubernetes", version=KUBERNETES_VERSION, module="k8s.io/kubernetes",
        binaries={b: f"k8s.io/kubernetes/cmd/{b}" for b in
                  ("kube-apiserver", "kube-controller-manager", "kube-scheduler")},
        ldflags=_version_ldflags(KUBERNETES_VERSION), tags="selinux,notest",
    ),
    Component(name="etcd", version="v3.7.3", module="go.etcd.io/etcd/server/v3",
              binaries={"etcd": "."}),
    Component(name="kwok", version="v0.8.0", module="sigs.k8s.io/kwok",
              binaries={"kwok": "sigs.k8s.io/kwok/cmd/kwok"}),
    # LoadBalancer addresses (stack/k8s/metallb.py); the controller only, no speaker. Not
    # v0.16.2: the module proxy refuses a dependency of it (stack/k8s/metallb/go.mod says which)
    Component(name="metallb", version="v0.15.2", module="go.universe.tf/metallb",
              binaries={"metallb-controller": "go.universe.tf/metallb/controller"}),
    # the Keystone token webhook; its Makefile sets the version the same way (its user agent
    # and --version report it)
    Component(name="keystone-auth", version="v1.36.0", module="k8s.io/cloud-provider-openstack",
              binaries={"k8s-keystone-auth": "k8s.io/cloud-provider-openstack/cmd/k8s-keystone-auth"},
              ldflags="-X k8s.io/cloud-provider-openstack/pkg/version.Version=v1.36.0 "
                      "-X k8s.io/component-base/version.gitVersion=v1.36.0"),
    # the authenticating sidecar of every service workload (access/proxy.py,
    # stack/authproxy.py); its Makefile sets the version the same way (--version reports it)
    Component(name="oauth2-proxy", version="v7.15.4",
              module="github.com/oauth2-proxy/oauth2-proxy/v7",
              binaries={"oauth2-proxy": "github.com/oauth2-proxy/oauth2-proxy/v7"},
              ldflags="-X github.com/oauth2-proxy/oauth2-proxy/v7/pkg/version.VERSION=v7.15.4"),
    # queueing (tenants/kueue.py, stack/k8s/kueue.py): quotas, admission, preemption; its
    # Makefile sets the version the same way
    Component(name="kueue", version="v0.19.2", module="sigs.k8s.io/kueue",
              binaries={"kueue": "sigs.k8s.io/kueue/cmd/kueue"},
              ldflags="-X sigs.k8s.io/kueue/pkg/version.GitVersion=v0.19.2"),
    # distributed training (stack/k8s/jobset.py): a JobSet starts, restarts and completes a
    # group of Jobs as one, and Kueue admits the group whole; its Makefile sets the version the
    # same way (and the commit, which a module zip has not)
    Component(name="jobset", version="v0.12.0", module="sigs.k8s.io/jobset",
              binaries={"jobset": "sigs.k8s.io/jobset"},
              ldflags="-X sigs.k8s.io/jobset/pkg/version.GitVersion=v0.12.0"),
    # MPI jobs (stack/k8s/mpi_operator.py): MPIJob kubeflow.org/v2beta1, a launcher and its
    # workers, admitted whole by Kueue. The wrapper's main is upstream's with a flag for its
    # health port (fixed upstream: stack/k8s/mpi-operator/main.go says why); its Makefile sets
    # the version the same way (and the commit and build date, which a module zip has not)
    Component(name="mpi-operator", version="v0.8.2", module="github.com/kubeflow/mpi-operator",
              binaries={"mpi-operator": "."},
              ldflags="-X github.com/kubeflow/mpi-operator/pkg/version.Version=v0.8.2"),
    # the gateway of the shared-address mode (stack/k8s/traefik.py): one address, a host name
    # per workload, its Kubernetes Ingress provider reading the portal's Ingresses; its
    # Makefile sets the version the same way. Built whole: Traefik has no build tags that
    # leave out providers (half its packages are lego's DNS providers, which its ACME provider
    # imports whether or not ACME is configured)
    Component(name="traefik", version="v3.6.12", module="github.com/traefik/traefik/v3",
              binaries={"traefik": "github.com/traefik/traefik/v3/cmd/traefik"},
              ldflags="-X github.com/traefik/traefik/v3/pkg/version.Version=v3.6.12"),
    # the SSH server inside every workload with SSH, and its entrypoint wrapper (sshd/main.go
    # says why this and not openssh-server): our own module at the repository's sshd/, built
    # static (cgo off) so that it runs in any image
    Component(name="portal-sshd", version="v1", module="gpu-portal.local/sshd",
              binaries={"gpu-portal-sshd": "."}, folder=HERE.parent.parent / "sshd"),
    # the dynamic provisioner of the real control plane's volumes (stack/k8s/provisioner.py):
    # our own small program on the library dynamic provisioners are written with, in a module
    # of its own that pins the library (stack/k8s/provisioner/main.go says what it provisions).
    # Built with the control plane's `notest` (which leaves the API types' fuzzing helpers out)
    # so that the Kubernetes 1.37 libraries both use compile once
    Component(name="provisioner", version="v1",
              module="sigs.k8s.io/sig-storage-lib-external-provisioner/v13",
              binaries={"gpu-portal-provisioner": "."}, tags="notest"),
    # the S3 server the tests run on loopback (stack/s3.py): versitygw (Apache-2.0) over a
    # folder, in a wrapper module at stack/versitygw; its Makefile sets the version the same way.
    # Not SeaweedFS: its one command pulls in some 500 modules (every filer store's driver and
    # cloud SDK) whose download and build do not fit a fresh machine's `make test`
    Component(name="versitygw", version="v1.8.0", module="github.com/versity/versitygw",
              binaries={"versitygw": "github.com/versity/versitygw/cmd/versitygw"},
              ldflags="-X main.Version=v1.8.0", folder=HERE.parent / "versitygw"),
    # the private container registry the tests run on loopback (stack/registry.py): CNCF
    # Distribution's `registry` with htpasswd and token auth and local storage only, in a
    # wrapper module at stack/distribution (its main.go says what it leaves out and why); its
    # Makefile sets the version the same way
    Component(name="distribution", version="v3.1.2",
              module="github.com/distribution/distribution/v3",
              binaries={"registry": "."}, folder=HERE.parent / "distribution",
              ldflags="-X github.com/distribution/distribution/v3/version.version=v3.1.2"),
    # the file server of a project's volumes (filesd/main.go says what it serves and how):
    # our own module at the repository's filesd/, the standard library only
    Component(name="portal-files", version="v1", module="gpu-portal.local/filesd",
              binaries={"gpu-portal-files": "."}, folder=HERE.parent.parent / "filesd"),
)}


# what each real control plane of the tests and the demo runs (stack/k8s/addons.py's default
# addons), and what queueing adds (Kueue, JobSet, the MPI operator)
CONTROL_PLANE = ("kubernetes", "etcd", "kwok", "metallb", "provisioner", "keystone-auth")
QUEUEING = ("kueue", "jobset", "mpi-operator")
# the background build's order: first what tests that need no control plane run (each small),
# then the control plane, queueing, and last the gateway of one test file; the tests that wait
# for one of the LATE ones run last (tests/fixtures/scheduling.py)
LATE = (*CONTROL_PLANE, *QUEUEING, "traefik")
NEED_ORDER = ("portal-sshd", "portal-files", "oauth2-proxy", "versitygw", "distribution", *LATE)


def _go() -> str:
    go = shutil.which("go")
    if go is None:
        raise StackError("the Go toolchain (go ≥ 1.26) is needed to build the real control plane: "
                         "install it from https://go.dev/dl/ and try again.")
    return go


@contextlib.contextmanager
def _locked(component: Component, *, quiet: bool) -> Iterator[None]:
    """Hold the component's build lock (a file beside its cache folder, per version and
    fingerprint), waiting while another process builds it."""
    final = component.bin_dir.parent
    final.parent.mkdir(parents=True, exist_ok=True)
    with open(final.parent / f".{final.name}.lock", "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not quiet:
                print(f"waiting for another process's build of {component.name} …",
                      file=sys.stderr, flush=True)
            fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def go_env(component: Component) -> dict[str, str]:
    """The environment the component is built in; its tests and `go vet` run in the same, so
    that they reuse the packages its build compiled (Go's build cache keys on it)."""
    return {**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=readonly",
            "CGO_ENABLED": "1" if component.cgo else "0"}


def compile_flags(component: Component) -> list[str]:
    """The flags of its build that decide how packages compile (ldflags only link): the same
    for `go test`, whose binary then has no path of the checkout in it either, and whose
    result Go's test cache keeps from one checkout to the next."""
    return ["-trimpath", *(["-tags", component.tags] if component.tags else [])]


def _commands(component: Component, out: Path) -> list[tuple[str, list[str]]]:
    """The `go build` commands of a component: one for all its binaries when each is named as
    its package (`-o DIR/` names them so), so that Go loads the packages once and links the
    binaries side by side; one per binary otherwise."""
    flags = ["-ldflags", f"-s -w {component.ldflags}".strip(), *compile_flags(component)]
    packages = list(component.binaries.values())
    if len(packages) > 1 and all(p.rsplit("/", 1)[-1] == b for b, p in component.binaries.items()):
        return [(", ".join(component.binaries),
                 [_go(), "build", *flags, "-o", f"{out}{os.sep}", *packages])]
    return [(binary, [_go(), "build", *flags, "-o", str(out / binary), package])
            for binary, package in component.binaries.items()]


def build(component: Component, *, quiet: bool = False) -> Path:
    """Build the component's binaries unless they are already cached; return their folder."""
    if component.built():
        return component.bin_dir
    with _locked(component, quiet=quiet):
        if not component.built():  # another process's build may have finished meanwhile
            _build(component, quiet=quiet)
    return component.bin_dir


def _build(component: Component, *, quiet: bool) -> None:
    final = component.bin_dir.parent
    staging = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    env = go_env(component)
    started = time.monotonic()
    if not quiet:
        print(f"building {component.module} {component.version} "
              f"({', '.join(component.binaries)}) into {final} …", file=sys.stderr, flush=True)
    try:
        (staging / "bin").mkdir()
        for binaries, cmd in _commands(component, staging / "bin"):
            result = subprocess.run(cmd, cwd=component.source, env=env, capture_output=True,
                                    text=True)
            if result.returncode != 0:
                raise StackError(_explain(component, binaries, result.stderr))
        missing = [b for b in component.binaries if not (staging / "bin" / b).is_file()]
        if missing:
            raise StackError(f"building {component.name} left no {', '.join(missing)}")
        (staging / "built.txt").write_text(
            f"{component.module} {component.version}\nbuilt in {time.monotonic() - started:.0f} s\n")
        if final.exists():  # a folder that lost a binary (removed by hand): replaced
            shutil.rmtree(final)
        staging.rename(final)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if not quiet:
        print(f"built {component.name} in {time.monotonic() - started:.0f} s", file=sys.stderr,
              flush=True)


def _explain(component: Component, binary: str, stderr: str) -> str:
    tail = "\n".join(stderr.strip().splitlines()[-15:])
    hint = "check the Go toolchain and the network to the Go module proxy, then run it again"
    lowered = stderr.lower()
    if "not available" in lowered or "unknown revision" in lowered or "404" in lowered \
            or "410 gone" in lowered:
        hint = (f"the Go module proxy does not serve a version this build pins: change the pin in "
                f"{_shown(component.source)}/go.mod to one it serves "
                f"(`go list -m -versions {component.module}`) and run `go mod tidy` there")
    elif "missing go.sum entry" in lowered or "updates to go.mod needed" in lowered:
        hint = f"{_shown(component.source)}/go.sum is out of date: run `go mod tidy` there"
    elif "requires go >=" in lowered or "go.mod requires go" in lowered:
        hint = "this Go toolchain is older than the module needs: install a newer Go"
    return (f"building {binary} of {component.module} {component.version} failed "
            f"({_shown(component.source)}): {hint}.\n{tail}")


def _shown(folder: Path) -> str:
    """The folder as the repository names it (the whole path for one outside it)."""
    root = HERE.parent.parent
    return folder.relative_to(root).as_posix() if folder.is_relative_to(root) else str(folder)


def module_dir(name: str) -> Path:
    """A component's upstream module in the Go module cache (downloaded if missing): where an
    addon reads the manifests (CRDs, webhooks, RBAC) that come with it."""
    component = COMPONENTS[name]
    result = subprocess.run(
        [_go(), "mod", "download", "-json", f"{component.module}@{component.version}"],
        cwd=component.source, capture_output=True, text=True,
        env={**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=readonly"})
    try:
        info = json.loads(result.stdout)
    except ValueError:
        info = {}
    if result.returncode != 0 or "Dir" not in info:
        raise StackError(f"go mod download {component.module}@{component.version} failed: "
                         f"{info.get('Error') or result.stderr.strip()[-500:]}")
    return Path(info["Dir"])


def apply_object(api: ApiClient, doc: dict[str, Any]) -> None:
    """Create an object with an admin ApiClient, or replace what is there (a cluster whose etcd
    outlived a run): the addons' manifests."""
    from kubernetes import dynamic
    from kubernetes.client.rest import ApiException

    resource = dynamic.DynamicClient(api).resources.get(api_version=doc["apiVersion"],
                                                        kind=doc["kind"])
    namespace = doc["metadata"].get("namespace")
    try:
        resource.create(body=doc, namespace=namespace)
    except ApiException as exc:
        if exc.status != 409:
            raise
        current = resource.get(name=doc["metadata"]["name"], namespace=namespace)
        doc = {**doc, "metadata": {**doc["metadata"],
                                   "resourceVersion": current.metadata.resourceVersion}}
        resource.replace(body=doc, namespace=namespace)


def service_account_token(api: ApiClient, namespace: str, name: str, seconds: int) -> str:
    """A TokenRequest token of a ServiceAccount an addon runs as (waiting the moment the
    account may take to be served): the least privilege upstream gives it, not an admin's."""
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    core = client.CoreV1Api(api)
    deadline = time.monotonic() + 30
    while True:
        try:
            answer = core.create_namespaced_service_account_token(
                name, namespace, client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(
                    audiences=["https://kubernetes.default.svc"], expiration_seconds=seconds)))
            token = answer.status.token if answer.status is not None else None
            if token is None:
                raise StackError(f"the token request for {namespace}/{name} was answered "
                                 "without a token")
            return token
        except ApiException as exc:
            if exc.status != 404 or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def apply_crds(api: ApiClient, docs: list[dict[str, Any]], *, what: str) -> None:
    """Create (or replace) an addon's CustomResourceDefinitions and wait until each is
    Established: served, so that its controller's informers and Kueue find it."""
    from kubernetes import client

    from ..procs import wait_for

    for doc in docs:
        apply_object(api, doc)
    extensions = client.ApiextensionsV1Api(api)

    def established() -> bool:
        for doc in docs:
            status = extensions.read_custom_resource_definition(doc["metadata"]["name"]).status
            if not any(c.type == "Established" and c.status == "True"
                       for c in (status.conditions if status else None) or ()):
                return False
        return True

    wait_for(established, timeout=30, what=f"{what}'s CRDs established", interval=0.2)


def serving_cert_dir(cp: ControlPlane, stem: str) -> Path:
    """A folder with tls.crt and tls.key for 127.0.0.1, issued by the cluster's CA: the
    `certDir` of a controller whose webhooks the API server calls on loopback (its own
    certificate management off)."""
    folder = cp.workdir / f"{stem}-certs"
    folder.mkdir(parents=True, exist_ok=True)
    cert, key = cp.ca.server_cert(f"{stem}-webhook")
    shutil.copyfile(cert, folder / "tls.crt")
    shutil.copyfile(key, folder / "tls.key")
    return folder


def start_controller(cp: ControlPlane, name: str, command: list[str], ready: Callable[[], object], *,
                     env: dict[str, str] | None = None, timeout: float = 90
                     ) -> subprocess.Popen[bytes]:
    """Start an addon's controller, logging to logs/<name>.log, and wait until `ready()`;
    stopped again, with its log's tail in the error, if it exits or is not ready in time."""
    from ..procs import stop, wait_for

    log_path = cp.workdir / "logs" / f"{name}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=cp.workdir,
                                start_new_session=True, env={**os.environ, **(env or {})})
    try:
        wait_for(ready, timeout=timeout, what=name, proc=proc, interval=0.2)
    except StackError as exc:
        stop(proc)
        tail = log_path.read_text(errors="replace")[-3000:]
        raise StackError(f"{exc}\n{tail}") from None
    return proc


# a controller-runtime manager's metrics bind address that turns its metrics server off
METRICS_OFF = "0"


def webhook_server_ready(health_url: str, webhook_port: int) -> bool:
    """A controller-runtime manager's readiness probe passes and its webhook port takes
    connections."""
    import contextlib
    import socket

    from ..procs import http_ok

    if not http_ok(health_url):
        return False
    with contextlib.suppress(OSError), socket.create_connection(
            ("127.0.0.1", webhook_port), timeout=1):
        return True
    return False


def ensure(*names: str, quiet: bool = False) -> dict[str, Path]:
    """Every named component's binaries (all when none is named), built if missing: name → path."""
    paths: dict[str, Path] = {}
    for name in names or tuple(COMPONENTS):
        component = COMPONENTS[name]
        bin_dir = build(component, quiet=quiet)
        paths.update({b: bin_dir / b for b in component.binaries})
    return paths


def start_background() -> bool:
    """Start building every missing component in a process of its own (niced, detached, its
    output in the cache's k8s/background.log) and return at once; False when all are built."""
    if all(c.built() for c in COMPONENTS.values()):
        return False
    _go()  # no toolchain: said now, not by each test that needs a component
    folder = cache_root() / "k8s"
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "background.log", "ab") as log:
        subprocess.Popen([sys.executable, "-m", "stack.k8s.build", "--builder"],
                         cwd=HERE.parent.parent, stdin=subprocess.DEVNULL, stdout=log,
                         stderr=subprocess.STDOUT, start_new_session=True)
    return True


def _builder() -> int:
    """The background build: every component in NEED_ORDER, unless another builder is at work.
    A component that fails is left to the test that needs it, which builds it again and says
    why."""
    folder = cache_root() / "k8s"
    with open(folder / ".background.lock", "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return 0
        started = time.monotonic()
        print(f"background build started {time.strftime('%Y-%m-%dT%H:%M:%S')}", flush=True)
        for name in NEED_ORDER:
            try:
                build(COMPONENTS[name])
            except StackError as exc:
                print(f"stack.k8s.build: {exc}", flush=True)
        print(f"background build done in {time.monotonic() - started:.0f} s", flush=True)
    return 0


def main(argv: list[str]) -> int:
    if argv == ["--background"]:
        try:
            if start_background():
                print(f"building the Go components in the background "
                      f"(log: {cache_root() / 'k8s' / 'background.log'})", file=sys.stderr)
        except StackError as exc:
            print(f"stack.k8s.build: {exc}", file=sys.stderr)
            return 1
        return 0
    if argv == ["--builder"]:
        os.nice(19)  # the tests that run meanwhile come first
        return _builder()
    unknown = [n for n in argv if n not in COMPONENTS]
    if unknown:
        print(f"unknown component(s) {', '.join(unknown)}; known: {', '.join(COMPONENTS)}",
              file=sys.stderr)
        return 2
    try:
        for name, path in ensure(*argv).items():
            print(f"{name}\t{path}")
    except StackError as exc:
        print(f"stack.k8s.build: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
