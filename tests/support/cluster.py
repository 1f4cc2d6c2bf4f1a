"""A test's cluster objects: its own, and gone before the next test starts.

A test session shares its kubesim, its real control plane and the one with Kueue between its
tests, one after another. Whatever a test leaves there, the next one counts: a pod still
terminating holds its GPUs, a ClusterQueue lends its quota to the cohort until it is gone, and a
namespace being deleted refuses new objects. So every fixture that hands a test a cluster
(`cluster`, `queued_cluster`) wraps it in `cluster_objects_of_the_test`: what namespaces and
ClusterQueues a test made are its own (they were not there when it started), and so are the
claims it made in namespaces it shares with others (a project's namespace lives for the whole
session: a claim left there counts against the next test's storage quota); at its end they are
deleted with every workload's objects, and the test waits until they are gone.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from kube.client import Kube, NotFound
from tests.support.waiting import eventually

WORKLOAD_SELECTOR = "gpu-portal.io/workload-id"  # every workload object, in every namespace
# made by a test and deleted at its end (the namespaces with everything in them)
OWN_KINDS = ("Namespace", "ClusterQueue", "Cohort", "PersistentVolume", "StorageClass")
# made by a test in any namespace, and deleted at its end
OWN_NAMESPACED_KINDS = ("PersistentVolumeClaim",)


def names_of(kube: Kube, kind: str) -> set[str]:
    """The names of a cluster-wide kind's objects; none where the cluster does not serve it."""
    try:
        return {o["metadata"]["name"] for o in kube.list(kind)["items"]}
    except NotFound:  # Kueue's kinds where Kueue is not installed
        return set()


def namespaced_names_of(kube: Kube, kind: str) -> set[tuple[str, str]]:
    """(namespace, name) of a namespaced kind's objects in every namespace."""
    return {(o["metadata"]["namespace"], o["metadata"]["name"]) for o in kube.list(kind)["items"]}


def remove_workload_objects(kube: Kube, *, wait: float = 0) -> None:
    """Delete every workload's objects; with `wait`, wait up to that many seconds until their
    pods are gone too. A pod outlives its owner a moment (the garbage collector, then the
    kubelet's graceful stop) and holds its GPUs meanwhile."""
    # last the pods themselves: a test's bare pods (a group's, made without their engine on
    # kubesim) have no owner whose deletion would collect them
    for kind in ("JobSet", "MPIJob", "Deployment", "Job", "Ingress", "Service",
                 "NetworkPolicy", "Secret", "ResourceClaimTemplate", "Pod"):
        try:
            objects = kube.list(kind, label_selector=WORKLOAD_SELECTOR)["items"]
        except NotFound:  # a distributed kind where its engine is not installed, DRA's
            # where resource.k8s.io is not served
            continue
        for obj in objects:
            meta = obj["metadata"]
            kube.delete(kind, meta["name"], meta["namespace"])  # False: collected meanwhile
    if wait:
        eventually(lambda: not workload_pods(kube), timeout=wait, interval=0.2,
                   message=lambda: f"workload pods still there: {workload_pods(kube)}")


def workload_pods(kube: Kube) -> list[str]:
    return [f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in
            kube.list("Pod", label_selector=WORKLOAD_SELECTOR)["items"]]


class PortalView:
    """A real cluster as the kubesim-era tests see a cluster: `.kubeconfig` is what the portal
    uses (its ServiceAccount), `.api_client()` is the test's admin client."""

    def __init__(self, cp: Any) -> None:
        self.cp = cp
        self.kubeconfig = str(cp.portal_kubeconfig)
        self.url = cp.url
        self.running = True

    def api_client(self) -> Any:
        return self.cp.api_client()


@contextlib.contextmanager
def portal_on(cp: Any, settings: Any) -> Iterator[PortalView]:
    """The portal pointed at the real control plane `cp` as its own least-privilege
    ServiceAccount for one test (tests/realcluster/conftest.py), the test's cluster objects
    deleted at its end."""
    from cluster.addresses import address_pools_forget
    from stack.k8s.addons import addon

    settings.KUBECONFIG = str(cp.portal_kubeconfig)
    address_pools_forget()  # what free addresses an earlier test left is not this one's
    # the GPU agents of the KWOK nodes, as `make demo CLUSTER=kube` passes them to the portal
    settings.PORTAL_GPU_EXPORTER_URLS = list(addon(cp, "gpumetrics").urls)
    # the next test counts free GPUs on this same cluster: this one's pods must be gone
    with cluster_objects_of_the_test(cp.api_client, timeout=90):
        yield PortalView(cp)


@contextlib.contextmanager
def cluster_objects_of_the_test(connect: Callable[[], Any], *, timeout: float) -> Iterator[None]:
    """Around a test: the namespaces and ClusterQueues made meanwhile are the test's; at the end
    they and every workload's objects are deleted, and this waits (up to `timeout` seconds)
    until they are gone, pods included. `connect` gives an ApiClient (a context manager) of an
    admin of the cluster: the test may have pointed the portal's settings elsewhere."""
    with connect() as client:
        kube = Kube(client)
        before = {kind: names_of(kube, kind) for kind in OWN_KINDS}
        before_namespaced = {kind: namespaced_names_of(kube, kind)
                             for kind in OWN_NAMESPACED_KINDS}
    yield
    with connect() as client:
        kube = Kube(client)
        remove_workload_objects(kube)
        made = {kind: names_of(kube, kind) - before[kind] for kind in OWN_KINDS}
        made_namespaced = {kind: namespaced_names_of(kube, kind) - before_namespaced[kind]
                           for kind in OWN_NAMESPACED_KINDS}
        namespaces_deleted(client, made["Namespace"], timeout=timeout)
        for kind, names in made.items():
            for name in names if kind != "Namespace" else ():  # deleted and gone already
                kube.delete(kind, name)
        for kind, keys in made_namespaced.items():
            for namespace, name in keys:
                kube.delete(kind, name, namespace)

        def left() -> list[str]:
            # only the kinds the test made something of are listed again: most tests made
            # none, and each list is a request the next test waits behind
            return (workload_pods(kube)
                    + [f"{kind} {name}" for kind, names in made.items() if names
                       for name in names & names_of(kube, kind)]
                    + [f"{kind} {namespace}/{name}" for kind, keys in made_namespaced.items()
                       if keys for namespace, name in keys & namespaced_names_of(kube, kind)])

        eventually(lambda: not left(), timeout=timeout, interval=0.1,
                   message=lambda: f"the test's cluster objects are still there: {left()}")


AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"


def api_request(client: Any, method: str, path: str, *, accept: str = "application/json",
             body: Any = None) -> Any:
    """A raw call to the API server with `client`'s credentials; the decoded JSON answer, or
    None where the object or collection is not there (404)."""
    from kubernetes.client.rest import ApiException

    verb, url, headers, data, _files = client.param_serialize(
        method, path, header_params={"Accept": accept, "Content-Type": "application/json"},
        body=body, auth_settings=["BearerToken"])
    response = client.call_api(verb, url, header_params=headers, body=data,
                               _request_timeout=(5, 30))
    payload = response.read()
    if response.status == 404:
        return None
    if not 200 <= response.status < 300:
        raise ApiException(http_resp=response.response)
    return json.loads(payload)


def namespaced_collections(client: Any) -> list[str]:
    """The path, under a namespace, of every namespaced resource the API server lists and
    deletes by collection (aggregated discovery: its preferred version of each group)."""
    paths = []
    for prefix in ("/api", "/apis"):
        for group in api_request(client, "GET", prefix, accept=AGGREGATED)["items"]:
            version = group["versions"][0]  # the preferred version comes first
            base = (f"/api/{version['version']}" if prefix == "/api"
                    else f"/apis/{group['metadata']['name']}/{version['version']}")
            paths += [f"{base}/namespaces/{{}}/{r['resource']}" for r in version["resources"]
                      if r.get("scope") == "Namespaced"
                      and {"list", "deletecollection"} <= set(r.get("verbs") or ())]
    return paths


def namespaces_deleted(client: Any, names: Iterable[str], *, timeout: float = 90) -> None:
    """Delete namespaces and wait until they are gone, everything in them first (`client`: an
    admin's ApiClient).

    On a real control plane this does what its namespace controller does with a deleted
    namespace, without that controller's waits: it starts 5 s after the deletion (a grace for
    the other API servers and etcd members of a highly available cluster to see it; the tests'
    control planes have one of each), and where an object with a finalizer remains (a claim,
    Kueue's Workloads) or a pod is still stopping it looks again only seconds later (8 s for a
    finalizer). Here: the namespaces are marked deleted (from then on the API server refuses
    new objects in them), every collection in them is deleted, and this waits until every one
    is empty — objects with finalizers gone when their controllers let them go, pods when they
    stopped — then it finalizes each namespace as that controller would (unless the controller
    may have begun on it: namespace_finalized) and waits until it is gone."""
    from kubernetes import client as k8s

    core = k8s.CoreV1Api(client)
    deleted = []
    for name in names:
        try:
            core.delete_namespace(name)
        except k8s.ApiException as exc:
            if exc.status != 404:  # 404: gone already
                raise
        else:  # marked deleted now, or already (by the portal): to be emptied either way
            deleted.append(name)
    if deleted and not is_kubesim(client):  # kubesim's namespace controller needs no help
        collections = [path.format(name) for path in namespaced_collections(client)
                       for name in deleted]

        def remaining(paths: list[str]) -> list[str]:
            """The collections of `paths` that still hold objects (the paths themselves)."""
            return [path for path in paths
                    if (api_request(client, "GET", f"{path}?limit=1") or {}).get("items")]

        def emptied(paths: list[str]) -> None:
            eventually(lambda: not remaining(paths), timeout=timeout, interval=0.1,
                       message=lambda: "the deleted namespaces still hold " + ", ".join(
                           path.split("/namespaces/", 1)[-1] for path in remaining(paths)))

        full = remaining(collections)
        while full:
            for path in full:
                api_request(client, "DELETE", path, body={"propagationPolicy": "Background"})
            emptied(full)
            # an object made just before its namespace was marked deleted, of another kind
            full = remaining(collections)
        for name in deleted:
            namespace_finalized(core, name)
    for name in deleted:
        namespace_gone(core, name, timeout=timeout)


def namespace_deleted(client: Any, name: str, *, timeout: float = 90) -> None:
    """One namespace deleted and gone (`namespaces_deleted`)."""
    namespaces_deleted(client, [name], timeout=timeout)


# The namespace controller looks at a deleted namespace 5 s after it saw the deletion. From then
# on it deletes every collection in the namespace *by name*, with no check of the namespace's uid,
# until its pass ends. A namespace finalized here while such a pass runs is gone, but the pass goes
# on, and the next test that makes a namespace of the same name (a tenant provisioned again) has
# its objects (RoleBindings, quotas) deleted under it. So this finalizes only a namespace marked
# deleted less than this long ago (the mark is kept to the second, rounded down: it reads older
# than it is), before the controller can have begun; an older one is left to the controller, which
# finalizes it when its own pass finds it empty.
BEFORE_THE_NAMESPACE_CONTROLLER = timedelta(seconds=3)


def namespace_finalized(core: Any, name: str) -> None:
    """Take the namespace controller's finalizer off an emptied, deleted namespace (what that
    controller does once it found it empty): the API server then removes it. Left to the
    controller where it may have begun on it (BEFORE_THE_NAMESPACE_CONTROLLER)."""
    from kubernetes.client.rest import ApiException

    while True:
        try:
            namespace = core.read_namespace(name)
            if not namespace.spec or "kubernetes" not in (namespace.spec.finalizers or ()):
                return  # finalized by the namespace controller meanwhile
            marked = namespace.metadata.deletion_timestamp
            if marked is None or datetime.now(UTC) - marked >= BEFORE_THE_NAMESPACE_CONTROLLER:
                return  # the controller's to finish: namespace_gone waits for it
            namespace.spec.finalizers = [f for f in namespace.spec.finalizers
                                         if f != "kubernetes"]
            core.replace_namespace_finalize(name, namespace)
            return
        except ApiException as exc:
            if exc.status == 404:  # and gone
                return
            if exc.status != 409:  # 409: changed since it was read; read it again
                raise


_KUBESIM: dict[str, bool] = {}  # API server URL -> whether it is kubesim


def is_kubesim(client: Any) -> bool:
    """Whether `client` talks to kubesim rather than a real kube-apiserver (its version says)."""
    host = str(client.configuration.host)
    if host not in _KUBESIM:
        version = api_request(client, "GET", "/version")
        _KUBESIM[host] = str(version.get("gitVersion", "")).endswith("-kubesim")
    return _KUBESIM[host]


def namespace_gone(core, name: str, timeout: float = 90) -> None:
    """Wait until a deleted namespace is gone, its pods with it (`core`: a CoreV1Api)."""
    from kubernetes.client.rest import ApiException

    def gone() -> bool:
        try:
            core.read_namespace(name)
        except ApiException as exc:
            if exc.status == 404:
                return True
            raise
        return False

    eventually(gone, timeout=timeout, interval=0.2, message=f"namespace {name} is not gone")


def cluster_cache_caught_up(kinds: tuple[str, ...] = ("Node",), timeout: float = 10.0) -> None:
    """Wait until the portal's read model (cluster) holds every object of these kinds as the API
    server lists them now (not a figure: the objects themselves; pods by their phase, which is
    what the read model keeps). A test that reads a figure from it (free GPUs) calls this first:
    the pods an earlier test left are gone from the API server when it starts, but the read
    model learns so through its watch, a moment later."""
    from cluster.cache import cluster_cache

    cache = cluster_cache()
    for kind in kinds:
        items = Kube().list(kind)["items"]
        if kind == "Pod":
            listed = {o["metadata"]["uid"]: (o.get("status") or {}).get("phase") or ""
                      for o in items}

            def current(_cache, listed=listed) -> bool:
                return {p.uid: p.phase for p in cache.pods.items()} == listed
        else:
            reflector = {"Node": cache.nodes}[kind]
            listed = {o["metadata"]["uid"]: o["metadata"]["resourceVersion"] for o in items}

            def current(_cache, reflector=reflector, listed=listed) -> bool:
                kept = {key: (o.get("metadata") or {}).get("resourceVersion")
                        for key, o in ((k, reflector.get(k)) for k in listed) if o is not None}
                return kept == listed and len(reflector) == len(listed)

        assert cache.wait_for(current, timeout), f"the portal's copy of {kind} lags"
