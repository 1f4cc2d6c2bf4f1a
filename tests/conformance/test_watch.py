"""Watch streams: events from a resourceVersion, selectors, bookmarks, timeouts, 410 Expired."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from kubernetes import client, watch

from tests.conformance import manifests as m
from tests.conformance.cluster import Cluster


def cm_path(ns: str) -> str:
    return f"/api/v1/namespaces/{ns}/configmaps"


def list_rv(cluster: Cluster, path: str) -> str:
    return cluster.request("GET", path).json()["metadata"]["resourceVersion"]


def after(delay: float, *actions) -> threading.Thread:
    """Run the writes in the background while the test reads the stream."""
    def run() -> None:
        time.sleep(delay)
        for action in actions:
            action()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def summary(events: list[dict]) -> list[tuple[str, str]]:
    return [(e["type"], e["object"]["metadata"].get("name", "")) for e in events]


def test_watch_from_resource_version_sees_changes_in_order(cluster: Cluster, ns: str):
    path = cm_path(ns)
    rv = list_rv(cluster, path)
    cluster.request("POST", path, m.configmap("a", {"k": "1"}))
    cluster.request("PATCH", f"{path}/a", {"data": {"k": "2"}},
                    content_type="application/merge-patch+json")
    cluster.request("DELETE", f"{path}/a")
    status, events = cluster.stream(path, {"watch": "1", "resourceVersion": rv,
                                           "timeoutSeconds": "10"},
                                    until=lambda ev: len(ev) >= 3)
    assert status == 200
    assert summary(events) == [("ADDED", "a"), ("MODIFIED", "a"), ("DELETED", "a")]
    for event in events:
        obj = event["object"]
        assert (obj["kind"], obj["apiVersion"]) == ("ConfigMap", "v1")
    assert events[1]["object"]["data"] == {"k": "2"}
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert rvs == sorted(rvs) and rvs[0] > int(rv)


def test_watch_without_resource_version_starts_with_the_current_objects(cluster: Cluster,
                                                                        ns: str):
    path = cm_path(ns)
    for name in ("a", "b"):
        cluster.request("POST", path, m.configmap(name, labels={"w": "1"}))
    after(0.5, lambda: cluster.request("POST", path, m.configmap("c", labels={"w": "1"})))
    _, events = cluster.stream(path, {"watch": "true", "labelSelector": "w",
                                      "timeoutSeconds": "10"},
                               until=lambda ev: len(ev) >= 3)
    assert sorted(summary(events[:2])) == [("ADDED", "a"), ("ADDED", "b")]
    assert summary(events[2:]) == [("ADDED", "c")]


def test_watch_with_a_label_selector_sees_objects_leave_and_enter(cluster: Cluster, ns: str):
    path = cm_path(ns)
    cluster.request("POST", path, m.configmap("a", labels={"sel": "yes"}))
    rv = list_rv(cluster, path)
    relabel = [
        lambda: cluster.request("PATCH", f"{path}/a", {"metadata": {"labels": {"sel": "no"}}},
                                content_type="application/merge-patch+json"),
        lambda: cluster.request("PATCH", f"{path}/a", {"metadata": {"labels": {"sel": "yes"}}},
                                content_type="application/merge-patch+json"),
    ]
    for action in relabel:
        action()
    _, events = cluster.stream(path, {"watch": "1", "resourceVersion": rv,
                                      "labelSelector": "sel=yes", "timeoutSeconds": "10"},
                               until=lambda ev: len(ev) >= 2)
    assert summary(events) == [("DELETED", "a"), ("ADDED", "a")]
    # the object that left is sent as it was when it matched, at the resourceVersion of the
    # change that made it leave
    left = events[0]["object"]["metadata"]
    assert left["labels"] == {"sel": "yes"}
    assert int(left["resourceVersion"]) > int(rv)
    assert events[1]["object"]["metadata"]["labels"] == {"sel": "yes"}


def test_watch_on_one_name_as_kubectl_delete_waits(cluster: Cluster, ns: str):
    path = cm_path(ns)
    cluster.request("POST", path, m.configmap("a"))
    cluster.request("POST", path, m.configmap("b"))
    rv = list_rv(cluster, path)
    after(0.3, lambda: cluster.request("DELETE", f"{path}/b"),
          lambda: cluster.request("DELETE", f"{path}/a"))
    _, events = cluster.stream(path, {"watch": "1", "resourceVersion": rv,
                                      "fieldSelector": "metadata.name=a",
                                      "timeoutSeconds": "10"},
                               until=lambda ev: len(ev) >= 1)
    assert summary(events) == [("DELETED", "a")]


def test_watch_timeout_ends_the_stream_quietly(cluster: Cluster, ns: str):
    started = time.monotonic()
    status, events = cluster.stream(cm_path(ns), {"watch": "1", "timeoutSeconds": "1",
                                                  "labelSelector": "none"})
    elapsed = time.monotonic() - started
    assert status == 200 and events == []
    assert 0.9 <= elapsed < 5


def test_bookmark_before_the_timeout(cluster: Cluster, ns: str):
    """A watch that allows bookmarks gets one about 2 s before it times out (the real watch
    cache sends it only when it has seen something at or after the watch's resourceVersion,
    hence the write)."""
    path = cm_path(ns)
    rv = list_rv(cluster, path)
    after(0.3, lambda: cluster.request("POST", path, m.configmap("a")))
    _, events = cluster.stream(path, {"watch": "1", "resourceVersion": rv,
                                      "allowWatchBookmarks": "true", "timeoutSeconds": "4"},
                               until=lambda ev: any(e["type"] == "BOOKMARK" for e in ev))
    assert [e["type"] for e in events] == ["ADDED", "BOOKMARK"], events
    obj = events[1]["object"]
    assert (obj["kind"], obj["apiVersion"]) == ("ConfigMap", "v1")
    assert set(obj["metadata"]) == {"resourceVersion"}
    added_rv = int(events[0]["object"]["metadata"]["resourceVersion"])
    assert int(obj["metadata"]["resourceVersion"]) >= added_rv


def test_watch_list_ends_its_initial_events_with_a_bookmark(cluster: Cluster, ns: str):
    path = cm_path(ns)
    cluster.request("POST", path, m.configmap("a", labels={"wl": "1"}))
    _, events = cluster.stream(path, {
        "watch": "1", "sendInitialEvents": "true", "resourceVersionMatch": "NotOlderThan",
        "allowWatchBookmarks": "true", "labelSelector": "wl", "timeoutSeconds": "10"},
        until=lambda ev: any(e["type"] == "BOOKMARK" for e in ev))
    assert events[0]["type"] == "ADDED" and events[0]["object"]["metadata"]["name"] == "a"
    bookmark = next(e for e in events if e["type"] == "BOOKMARK")
    assert bookmark["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


def test_official_client_watch_stream(cluster: Cluster, ns: str):
    core = cluster.core
    rv = core.list_namespaced_config_map(ns).metadata.resource_version
    after(0.3, lambda: core.create_namespaced_config_map(ns, m.configmap("a")))
    seen = []
    w = watch.Watch()
    for event in w.stream(core.list_namespaced_config_map, ns, resource_version=rv,
                          timeout_seconds=10):
        seen.append((event["type"], event["object"]))
        w.stop()
    kind, obj = seen[0]
    assert kind == "ADDED" and isinstance(obj, client.V1ConfigMap)
    assert obj.metadata.name == "a"


# ---------------------------------------------------------------------- 410 Expired


@dataclass
class Expired:
    """Resource versions and a continue token taken before the cluster forgot its history."""

    path: str
    old_rv: str
    token: str


@pytest.fixture(scope="module")
def expired(session_cluster: Cluster) -> Iterator[Expired]:
    cluster = session_cluster
    core = cluster.core
    ns = f"c-expired-{int(time.time() * 1000) % 10**8}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))
    path = cm_path(ns)
    for i in range(3):
        cluster.request("POST", path, m.configmap(f"cm-{i}", labels={"e": "1"}))
    first_page = cluster.request("GET", path, query={"limit": "1"}).json()
    old_rv = first_page["metadata"]["resourceVersion"]
    for i in range(3, 6):
        cluster.request("POST", path, m.configmap(f"cm-{i}", labels={"e": "1"}))
    cluster.expire_history()
    yield Expired(path, old_rv, first_page["metadata"]["continue"])
    core.delete_namespace(ns)


def test_list_at_a_compacted_resource_version_is_410(cluster: Cluster, expired: Expired):
    resp = cluster.request("GET", expired.path, query={
        "resourceVersion": expired.old_rv, "resourceVersionMatch": "Exact"})
    assert resp.status == 410
    assert resp.json() == {"kind": "Status", "apiVersion": "v1", "metadata": {},
                           "status": "Failure", "reason": "Expired", "code": 410,
                           "message": "The resourceVersion for the provided list is too old."}


def test_continue_after_compaction_is_410(cluster: Cluster, expired: Expired):
    resp = cluster.request("GET", expired.path, query={"limit": "1",
                                                       "continue": expired.token})
    assert resp.status == 410
    body = resp.json()
    assert body["reason"] == "Expired"
    assert body["message"].startswith("The provided continue parameter is too old to display a "
                                      "consistent list result.")
    # the answer carries a token that continues with a fresh, inconsistent list
    assert body["metadata"].get("continue")


def test_watch_from_a_compacted_resource_version_is_an_error_event(cluster: Cluster,
                                                                   expired: Expired):
    status, events = cluster.stream(expired.path, {"watch": "1", "resourceVersion":
                                                   expired.old_rv, "timeoutSeconds": "5"},
                                    until=lambda ev: len(ev) >= 1)
    assert status == 200 and len(events) == 1
    assert events[0]["type"] == "ERROR"
    obj = events[0]["object"]
    assert {k: obj[k] for k in ("kind", "apiVersion", "status", "reason", "code")} == {
        "kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Expired",
        "code": 410}
    assert obj["message"].startswith(f"too old resource version: {expired.old_rv} (")


def test_official_client_raises_410_on_an_expired_watch(cluster: Cluster, expired: Expired):
    ns = expired.path.split("/")[4]
    with pytest.raises(client.ApiException) as err:
        for _ in watch.Watch().stream(cluster.core.list_namespaced_config_map, ns,
                                      resource_version=expired.old_rv, timeout_seconds=5):
            pass
    assert err.value.status == 410
