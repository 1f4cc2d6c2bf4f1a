"""Watch: event streams from a resourceVersion, 410, bookmarks, timeouts, watch-list."""

from __future__ import annotations

import asyncio
import http.client
import threading
import time
from urllib.parse import urlparse

import pytest
from kubernetes import client, watch

from tests.kubesim.cluster_helpers import stream_lines
from tests.kubesim.conftest import Raw


def test_watch_with_official_client(api_client, kube_namespace):
    core = client.CoreV1Api(api_client)
    listed = core.list_namespaced_config_map(kube_namespace)
    rv = listed.metadata.resource_version

    def writer():
        time.sleep(0.2)
        core.create_namespaced_config_map(kube_namespace, {"metadata": {"name": "w"}})
        core.patch_namespaced_config_map("w", kube_namespace, {"data": {"a": "1"}})
        core.delete_namespaced_config_map("w", kube_namespace)

    threading.Thread(target=writer, daemon=True).start()
    w = watch.Watch()
    seen = []
    for event in w.stream(
        core.list_namespaced_config_map, kube_namespace, resource_version=rv, timeout_seconds=5
    ):
        seen.append(
            (event["type"], event["object"].metadata.name, (event["object"].data or {}).get("a"))
        )
        if event["type"] == "DELETED":
            w.stop()
    assert seen == [("ADDED", "w", None), ("MODIFIED", "w", "1"), ("DELETED", "w", "1")]
    assert int(event["object"].metadata.resource_version) > int(rv)


def test_watch_from_zero_sends_synthetic_added(kubesim, raw, kube_namespace):
    path = f"/api/v1/namespaces/{kube_namespace}/configmaps"
    for name in ("x", "y"):
        raw.json("POST", path, {"metadata": {"name": name}})
    for rv in ("", "&resourceVersion=0"):
        status, events = stream_lines(kubesim, path + "?watch=true&timeoutSeconds=1" + rv)
        assert status == 200
        assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
            ("ADDED", "x"),
            ("ADDED", "y"),
        ]
        assert events[0]["object"]["kind"] == "ConfigMap"
        assert events[0]["object"]["apiVersion"] == "v1"


def test_watch_timeout_ends_stream(kubesim, kube_namespace):
    t0 = time.monotonic()
    status, events = stream_lines(
        kubesim,
        f"/api/v1/namespaces/{kube_namespace}/configmaps?watch=1&timeoutSeconds=1"
        "&resourceVersion=1",
    )
    assert status == 200 and events == []
    assert 0.9 <= time.monotonic() - t0 < 5


def test_watch_selector_transitions(kubesim, raw, kube_namespace):
    path = f"/api/v1/namespaces/{kube_namespace}/configmaps"
    _, listed = raw.json("GET", path)
    rv = listed["metadata"]["resourceVersion"]
    raw.json("POST", path, {"metadata": {"name": "m", "labels": {"app": "no"}}})
    raw.json(
        "PATCH",
        path + "/m",
        {"metadata": {"labels": {"app": "yes"}}},
        content_type="application/merge-patch+json",
    )
    raw.json(
        "PATCH", path + "/m", {"data": {"k": "v"}}, content_type="application/merge-patch+json"
    )
    raw.json(
        "PATCH",
        path + "/m",
        {"metadata": {"labels": {"app": "no"}}},
        content_type="application/merge-patch+json",
    )
    _, events = stream_lines(
        kubesim, path + f"?watch=1&labelSelector=app%3Dyes&resourceVersion={rv}&timeoutSeconds=1"
    )
    assert [e["type"] for e in events] == ["ADDED", "MODIFIED", "DELETED"]


def test_legacy_watch_path_and_field_selector_by_name(kubesim, raw, kube_namespace):
    path = f"/api/v1/namespaces/{kube_namespace}/configmaps"
    _, listed = raw.json("GET", path)
    rv = listed["metadata"]["resourceVersion"]
    raw.json("POST", path, {"metadata": {"name": "one"}})
    raw.json("POST", path, {"metadata": {"name": "two"}})
    _, events = stream_lines(
        kubesim,
        f"/api/v1/watch/namespaces/{kube_namespace}/configmaps"
        f"?resourceVersion={rv}&timeoutSeconds=1",
    )
    assert [e["object"]["metadata"]["name"] for e in events] == ["one", "two"]
    _, events = stream_lines(
        kubesim,
        path + f"?watch=1&resourceVersion={rv}&timeoutSeconds=1&fieldSelector=metadata.name%3Dtwo",
    )
    assert [e["object"]["metadata"]["name"] for e in events] == ["two"]


def test_bookmarks(kubesim_factory):
    server = kubesim_factory(extra_args=["--no-cluster", "--bookmark-interval", "0.3"])
    try:
        raw = Raw(server)
        _, listed = raw.json("GET", "/api/v1/namespaces/default/configmaps")
        rv = listed["metadata"]["resourceVersion"]
        _, events = stream_lines(
            server,
            "/api/v1/namespaces/default/configmaps?watch=1"
            f"&allowWatchBookmarks=true&resourceVersion={rv}"
            # bookmarks stop 2 s before the timeout, as the real watch cache's do
            "&timeoutSeconds=3",
        )
        assert events and all(e["type"] == "BOOKMARK" for e in events)
        assert events[0]["object"] == {
            "kind": "ConfigMap",
            "apiVersion": "v1",
            "metadata": {"resourceVersion": rv},
        }
        _, events = stream_lines(
            server,
            f"/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={rv}&timeoutSeconds=1",
        )
        assert events == []  # no bookmarks unless asked for
    finally:
        server.stop()


def test_send_initial_events(kubesim, raw, kube_namespace):
    path = f"/api/v1/namespaces/{kube_namespace}/configmaps"
    raw.json("POST", path, {"metadata": {"name": "seed"}})
    _, events = stream_lines(
        kubesim,
        path + "?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
        "&allowWatchBookmarks=true&timeoutSeconds=1",
        limit=2,
    )
    assert events[0]["type"] == "ADDED" and events[0]["object"]["metadata"]["name"] == "seed"
    assert events[1]["type"] == "BOOKMARK"
    assert events[1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    status, body = raw.json("GET", path + "?watch=1&sendInitialEvents=true")
    assert status == 422 and body["reason"] == "Invalid"


def test_watch_too_old_gets_410_error_event(kubesim_factory):
    server = kubesim_factory(extra_args=["--no-cluster", "--history-size", "10"])
    try:
        raw = Raw(server)
        path = "/api/v1/namespaces/default/configmaps"
        for i in range(15):
            raw.json("POST", path, {"metadata": {"name": f"c{i}"}})
        status, events = stream_lines(server, path + "?watch=1&resourceVersion=2")
        assert status == 200 and len(events) == 1
        error = events[0]
        assert error["type"] == "ERROR"
        obj = error["object"]
        assert (obj["kind"], obj["status"], obj["reason"], obj["code"]) == (
            "Status",
            "Failure",
            "Expired",
            410,
        )
        assert obj["message"].startswith("too old resource version: 2 (")
        # the official client turns it into ApiException(410)
        with server.api_client() as api:
            core = client.CoreV1Api(api)
            with pytest.raises(client.ApiException) as e:
                for _ in watch.Watch().stream(
                    core.list_namespaced_config_map,
                    "default",
                    resource_version="2",
                    timeout_seconds=2,
                ):
                    pass
            assert e.value.status == 410
    finally:
        server.stop()


def test_slow_watcher_does_not_block_others(kubesim, raw, kube_namespace):
    """One connection that never reads must not stop another from getting its events."""
    url = urlparse(kubesim.url)
    path = f"/api/v1/namespaces/{kube_namespace}/configmaps"
    _, listed = raw.json("GET", path)
    rv = listed["metadata"]["resourceVersion"]
    stalled = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
    stalled.request("GET", path + f"?watch=1&resourceVersion={rv}&timeoutSeconds=5")
    big = "x" * 100_000
    for i in range(20):  # ~2 MB the stalled watcher never reads
        raw.json("POST", path, {"metadata": {"name": f"big{i}"}, "data": {"v": big}})
    t0 = time.monotonic()
    _, events = stream_lines(
        kubesim, path + f"?watch=1&resourceVersion={rv}&timeoutSeconds=5", limit=20
    )
    assert len(events) == 20 and time.monotonic() - t0 < 3
    stalled.close()


def test_watch_with_kubernetes_asyncio(kubesim, kube_namespace):
    from kubernetes_asyncio import client as aclient
    from kubernetes_asyncio import config as aconfig
    from kubernetes_asyncio import watch as awatch

    async def run() -> list[tuple[str, str]]:
        api_client = await aconfig.new_client_from_config(config_file=kubesim.kubeconfig)
        async with api_client:
            core = aclient.CoreV1Api(api_client)
            listed = await core.list_namespaced_config_map(kube_namespace)
            rv = listed.metadata.resource_version

            async def writer():
                await asyncio.sleep(0.2)
                await core.create_namespaced_config_map(
                    kube_namespace, {"metadata": {"name": "async"}}
                )

            task = asyncio.create_task(writer())
            seen = []
            w = awatch.Watch()
            async with w.stream(
                core.list_namespaced_config_map,
                kube_namespace,
                resource_version=rv,
                timeout_seconds=5,
            ) as stream:
                async for event in stream:
                    seen.append((event["type"], event["object"].metadata.name))
                    w.stop()
            await task
            return seen

    assert asyncio.run(run()) == [("ADDED", "async")]
