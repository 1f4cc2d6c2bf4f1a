"""Lists: selectors, pagination, resourceVersion semantics, 410 Gone."""

from __future__ import annotations

import base64
import json

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.kubesim.conftest import Raw


@pytest.fixture
def labelled(api_client, kube_namespace):
    core = client.CoreV1Api(api_client)
    specs = {
        "a": {"app": "web", "tier": "front"},
        "b": {"app": "web", "tier": "back"},
        "c": {"app": "db"},
        "d": {},
    }
    for name, labels in specs.items():
        core.create_namespaced_config_map(
            kube_namespace, {"metadata": {"name": name, "labels": labels}}
        )
    return core, kube_namespace


@pytest.mark.parametrize(
    "selector,expected",
    [
        ("app=web", "ab"),
        ("app==web", "ab"),
        ("app!=web", "cd"),
        ("app in (web,db)", "abc"),
        ("app notin (web)", "cd"),
        ("tier", "ab"),
        ("!tier", "cd"),
        ("app=web,tier=back", "b"),
        ("app in (web), !tier", ""),
        ("", "abcd"),
    ],
)
def test_label_selectors(labelled, selector, expected):
    core, ns = labelled
    items = core.list_namespaced_config_map(ns, label_selector=selector).items
    assert "".join(sorted(i.metadata.name for i in items)) == expected


def test_bad_label_selector_is_400(labelled):
    core, ns = labelled
    with pytest.raises(ApiException) as e:
        core.list_namespaced_config_map(ns, label_selector="app in (web")
    assert e.value.status == 400


def test_field_selectors(labelled):
    core, ns = labelled
    names = [
        i.metadata.name
        for i in core.list_namespaced_config_map(ns, field_selector="metadata.name=c").items
    ]
    assert names == ["c"]
    names = [
        i.metadata.name
        for i in core.list_namespaced_config_map(ns, field_selector="metadata.name!=c").items
    ]
    assert names == ["a", "b", "d"]
    everywhere = core.list_config_map_for_all_namespaces(
        field_selector=f"metadata.namespace={ns},metadata.name=a"
    ).items
    assert [(i.metadata.namespace, i.metadata.name) for i in everywhere] == [(ns, "a")]


def test_unsupported_field_selector_is_400(labelled):
    core, ns = labelled
    with pytest.raises(ApiException) as e:
        core.list_namespaced_config_map(ns, field_selector="data.a=1")
    body = json.loads(e.value.body)
    assert (e.value.status, body["reason"], body["message"]) == (
        400,
        "BadRequest",
        "field label not supported: data.a",
    )


def test_pod_and_event_field_selectors(api_client, kube_namespace):
    core = client.CoreV1Api(api_client)
    core.create_namespaced_pod(
        kube_namespace,
        {
            "metadata": {"name": "p"},
            "spec": {"nodeName": "no-such-node", "containers": [{"name": "c", "image": "busybox"}]},
        },
    )
    assert [
        p.metadata.name
        for p in core.list_namespaced_pod(
            kube_namespace, field_selector="spec.nodeName=no-such-node"
        ).items
    ] == ["p"]
    phases = {
        p.status.phase
        for p in core.list_namespaced_pod(
            kube_namespace, field_selector="status.phase!=Succeeded"
        ).items
    }
    assert phases and "Succeeded" not in phases
    pod = core.read_namespaced_pod("p", kube_namespace)
    core.create_namespaced_event(
        kube_namespace,
        {
            "metadata": {"name": "e1"},
            "reason": "Hello",
            "type": "Warning",
            "message": "m",
            "involvedObject": {
                "kind": "Pod",
                "name": "p",
                "namespace": kube_namespace,
                "uid": pod.metadata.uid,
            },
        },
    )
    selector = (
        f"involvedObject.name=p,involvedObject.namespace={kube_namespace},"
        f"involvedObject.uid={pod.metadata.uid},involvedObject.kind=Pod,type=Warning"
    )
    events = core.list_namespaced_event(kube_namespace, field_selector=selector).items
    assert [e.reason for e in events] == ["Hello"]


def test_pagination(api_client, kube_namespace):
    core = client.CoreV1Api(api_client)
    for i in range(7):
        core.create_namespaced_config_map(kube_namespace, {"metadata": {"name": f"cm{i}"}})
    first = core.list_namespaced_config_map(kube_namespace, limit=3)
    assert [i.metadata.name for i in first.items] == ["cm0", "cm1", "cm2"]
    assert first.metadata.remaining_item_count == 4
    token = first.metadata._continue
    decoded = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    assert decoded["rv"] == int(first.metadata.resource_version)
    # a change between pages does not show in the continued (consistent) list
    core.create_namespaced_config_map(kube_namespace, {"metadata": {"name": "cm3a"}})
    second = core.list_namespaced_config_map(kube_namespace, limit=3, _continue=token)
    assert [i.metadata.name for i in second.items] == ["cm3", "cm4", "cm5"]
    assert second.metadata.resource_version == first.metadata.resource_version
    third = core.list_namespaced_config_map(
        kube_namespace, limit=3, _continue=second.metadata._continue
    )
    assert [i.metadata.name for i in third.items] == ["cm6"]
    assert third.metadata._continue is None and third.metadata.remaining_item_count is None
    # with a selector there is no remainingItemCount
    sel = core.list_namespaced_config_map(kube_namespace, limit=2, label_selector="!nope")
    assert sel.metadata._continue and sel.metadata.remaining_item_count is None


def test_bad_continue_token_is_400(raw, kube_namespace):
    status, body = raw.json(
        "GET", f"/api/v1/namespaces/{kube_namespace}/configmaps?limit=1&continue=garbage!"
    )
    assert status == 400 and body["reason"] == "BadRequest"


def test_list_items_have_no_kind_and_list_has_string_rv(raw, labelled):
    _, ns = labelled
    _, body = raw.json("GET", f"/api/v1/namespaces/{ns}/configmaps")
    assert body["kind"] == "ConfigMapList" and body["apiVersion"] == "v1"
    assert isinstance(body["metadata"]["resourceVersion"], str)
    assert len(body["items"]) == 4  # the fixture's a, b, c, d: the check below is not vacuous
    assert all("kind" not in i and "apiVersion" not in i for i in body["items"])


def test_resource_version_match_needs_resource_version(raw):
    status, body = raw.json("GET", "/api/v1/configmaps?resourceVersionMatch=NotOlderThan")
    assert status == 422 and body["reason"] == "Invalid"
    assert body["details"]["kind"] == "ListOptions"
    assert body["details"]["group"] == "meta.k8s.io"
    assert "resourceVersionMatch is forbidden unless resourceVersion is provided" in body["message"]


def test_list_resource_version_semantics(raw, kube_namespace):
    path = f"/api/v1/namespaces/{kube_namespace}/configmaps"
    raw.json("POST", path, {"metadata": {"name": "one"}})
    _, first = raw.json("GET", path)
    rv = first["metadata"]["resourceVersion"]
    raw.json("POST", path, {"metadata": {"name": "two"}})
    # unset = most recent; "0" = any (kubesim: the newest); N = not older than N
    for query in ("", "?resourceVersion=0", f"?resourceVersion={rv}"):
        _, body = raw.json("GET", path + query)
        assert [i["metadata"]["name"] for i in body["items"]] == ["one", "two"]
    # Exact serves the list as it was at N
    _, exact = raw.json("GET", path + f"?resourceVersion={rv}&resourceVersionMatch=Exact")
    assert [i["metadata"]["name"] for i in exact["items"]] == ["one"]
    assert exact["metadata"]["resourceVersion"] == rv
    status, body = raw.json("GET", path + "?resourceVersion=99999999")
    assert status == 504 and body["reason"] == "Timeout"


@pytest.fixture(scope="module")
def small_history(kubesim_factory):
    server = kubesim_factory(extra_args=["--no-cluster", "--history-size", "20"])
    yield Raw(server)
    server.stop()


def test_list_from_compacted_resource_version_is_410(small_history):
    raw = small_history
    path = "/api/v1/namespaces/default/configmaps"
    raw.json("POST", path, {"metadata": {"name": "first"}})
    _, body = raw.json("GET", path + "?limit=1")
    old_rv = body["metadata"]["resourceVersion"]
    raw.json("POST", path, {"metadata": {"name": "second"}})
    _, page = raw.json("GET", path + "?limit=1")
    for i in range(25):
        raw.json("POST", path, {"metadata": {"name": f"filler{i}"}})
    status, body = raw.json("GET", path + f"?resourceVersion={old_rv}&resourceVersionMatch=Exact")
    assert status == 410
    assert body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "The resourceVersion for the provided list is too old.",
        "reason": "Expired",
        "code": 410,
    }
    status, body = raw.json("GET", path + f"?limit=1&continue={page['metadata']['continue']}")
    assert status == 410 and body["reason"] == "Expired"
    assert body["message"].startswith("The provided continue parameter is too old")
