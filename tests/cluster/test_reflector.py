"""The reflector keeps a kind's objects right through resumed watches and 410 relists, against
kubesim over HTTP (a short history, so that falling behind is a 410)."""

from __future__ import annotations

import json
import urllib.request

import pytest

from kube.client import Kube
from kube.reflector import Reflector

LABELS = {"keep": "yes"}


@pytest.fixture
def small(kubesim_factory):
    server = kubesim_factory(extra_args=["--history-size", "20"])
    yield server
    server.stop()


def secret(name: str, labels: dict | None = None) -> dict:
    return {"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": name, "namespace": "default", "labels": labels or {}}}


def listed(kube: Kube) -> dict[str, str]:
    """uid → resourceVersion of the labelled secrets, as the API server lists them now."""
    return {o["metadata"]["uid"]: o["metadata"]["resourceVersion"]
            for o in kube.list("Secret", label_selector="keep=yes")["items"]}


def kept(reflector: Reflector) -> dict[str, str]:
    return {o["metadata"]["uid"]: o["metadata"]["resourceVersion"] for o in reflector.items()}


def test_a_resumed_watch_and_a_relist_on_410_keep_the_store_right(small):
    kube = Kube(small.api_client())
    if kube.get("Namespace", "default") is None:
        kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
    for i in range(3):
        kube.create(secret(f"keep-{i}", LABELS))
    reflector = Reflector("Secret", kube=lambda: Kube(small.api_client()),
                          label_selector="keep=yes", watch_seconds=1)
    reflector.start()
    try:
        assert reflector.wait_synced(10)
        assert kept(reflector) == listed(kube) and len(reflector) == 3
        first_version = reflector.version

        # the watch ends every second and is resumed from the last resourceVersion: no relist
        assert reflector.wait_for(lambda _: reflector.watches >= 3, timeout=10)
        kube.create(secret("keep-3", LABELS))
        kube.delete("Secret", "keep-0", "default")
        assert reflector.wait_for(lambda _: kept(reflector) == listed(kube), timeout=10)
        assert reflector.lists == 1 and reflector.expired == 0
        assert reflector.version > first_version

        # more changes than the server's history holds, none of them selected, and the history
        # forgotten (compaction): the resume from the last selected change is answered 410, the
        # reflector relists
        kube.delete("Secret", "keep-1", "default")
        kube.create(secret("keep-4", LABELS))
        for i in range(30):  # none of them the reflector's: its resourceVersion stays behind
            kube.create(secret(f"churn-{i}"))
        request = urllib.request.Request(f"{small.url}/kubesim/v1/compact", method="POST",
                                         data=b"{}", headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=5) as response:  # noqa: S310 - loopback
            assert json.loads(response.read() or b"{}") is not None
        assert reflector.wait_for(lambda _: reflector.expired >= 1, timeout=10)
        kube.create(secret("keep-5", LABELS))
        assert reflector.wait_for(lambda _: kept(reflector) == listed(kube), timeout=10)
        assert reflector.lists >= 2
        names = sorted(o["metadata"]["name"] for o in reflector.items())
        assert names == ["keep-2", "keep-3", "keep-4", "keep-5"]
        assert reflector.synced and reflector.error is None
    finally:
        reflector.stop()


def test_a_cluster_that_does_not_answer_is_not_waited_for(kubesim_factory):
    gone = kubesim_factory()
    client = gone.api_client()
    gone.stop()
    reflector = Reflector("Node", kube=lambda: Kube(client))
    reflector.start()
    try:
        assert reflector.wait_synced(10) is False
        assert reflector.error is not None and not reflector.synced
    finally:
        reflector.stop()
