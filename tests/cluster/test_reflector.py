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


def test_callbacks_hear_every_change_before_the_version_moves_and_a_resume_lists_nothing(small):
    """on_change hears the list and every watched change with the store already holding it and
    the reflector's resourceVersion not yet past it (a consumer storing that version after its
    work never skips a change); a reflector started from a kept store and resourceVersion
    resumes without a list, and stop() ends its watch at once."""
    kube = Kube(small.api_client())
    if kube.get("Namespace", "default") is None:
        kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
    kube.create(secret("heard-0", LABELS))
    heard: list[tuple[str, str, str | None, str, bool]] = []
    lists: list[float] = []

    def reflector_of(**kwargs) -> Reflector:
        def on_change(event_type: str, obj: dict) -> None:
            meta = obj["metadata"]
            stored = made.get(meta["uid"]) is not None
            heard.append((event_type, meta["name"], made.resource_version,
                          meta["resourceVersion"], stored == (event_type != "DELETED")))

        made = Reflector("Secret", kube=lambda: Kube(small.api_client()),
                         label_selector="keep=yes", on_change=on_change, on_list=lists.append,
                         **kwargs)
        return made

    first = reflector_of(watch_seconds=1)
    first.start()
    try:
        assert first.wait_synced(10) and len(lists) == 1
        assert [(t, n) for t, n, *_ in heard] == [("ADDED", "heard-0")]
        kube.create(secret("heard-1", LABELS))
        kube.delete("Secret", "heard-0", "default")
        assert first.wait_for(lambda _: ("DELETED", "heard-0") in [(t, n) for t, n, *_ in heard],
                              timeout=10)
        watched = heard[1:]
        assert [(t, n) for t, n, *_ in watched] == [("ADDED", "heard-1"),
                                                    ("DELETED", "heard-0")]
        assert all(int(before) < int(version) and in_store
                   for _, _, before, version, in_store in watched), heard
    finally:
        first.stop()

    kube.create(secret("heard-2", LABELS))  # while no one watches
    resumed = reflector_of(resource_version=first.resource_version, items=first.store(),
                           watch_seconds=30)
    resumed.start()
    try:
        assert resumed.wait_for(lambda _: kept(resumed) == listed(kube), timeout=10)
        assert resumed.lists == 0 and len(lists) == 1  # resumed, not listed
        assert heard[-1][:2] == ("ADDED", "heard-2")
    finally:
        resumed.stop()
    resumed._thread.join(5)  # its 30 s watch is cut off, not waited out
    assert not resumed._thread.is_alive()
