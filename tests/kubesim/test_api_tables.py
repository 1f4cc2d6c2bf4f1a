"""Table output (what kubectl get asks for) and its fallbacks."""

from __future__ import annotations

import json

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"


def test_pod_table(raw, kube_namespace):
    raw.json(
        "POST",
        f"/api/v1/namespaces/{kube_namespace}/pods",
        {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "x"}]}},
    )
    status, body = raw.json(
        "GET", f"/api/v1/namespaces/{kube_namespace}/pods", headers={"Accept": TABLE}
    )
    assert status == 200 and body["kind"] == "Table"
    assert body["apiVersion"] == "meta.k8s.io/v1"
    columns = [(c["name"], c["priority"]) for c in body["columnDefinitions"]]
    assert columns[:5] == [("Name", 0), ("Ready", 0), ("Status", 0), ("Restarts", 0), ("Age", 0)]
    assert ("IP", 1) in columns and ("Node", 1) in columns
    row = body["rows"][0]
    assert row["cells"][0] == "p" and row["cells"][1] == "0/1"
    assert row["object"]["kind"] == "PartialObjectMetadata"
    assert row["object"]["metadata"]["name"] == "p"
    assert body["metadata"]["resourceVersion"]


def test_tables_for_other_kinds(raw, kube_namespace):
    ns = kube_namespace
    raw.json(
        "POST",
        f"/apis/apps/v1/namespaces/{ns}/deployments",
        {
            "metadata": {"name": "d"},
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": {"a": "b"}},
                "template": {
                    "metadata": {"labels": {"a": "b"}},
                    "spec": {"containers": [{"name": "c", "image": "x"}]},
                },
            },
        },
    )
    _, body = raw.json(
        "GET", f"/apis/apps/v1/namespaces/{ns}/deployments", headers={"Accept": TABLE}
    )
    assert [c["name"] for c in body["columnDefinitions"] if c["priority"] == 0] == [
        "Name",
        "Ready",
        "Up-to-date",
        "Available",
        "Age",
    ]
    raw.json(
        "POST",
        f"/api/v1/namespaces/{ns}/services",
        {"metadata": {"name": "s"}, "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]}},
    )
    _, body = raw.json("GET", f"/api/v1/namespaces/{ns}/services/s", headers={"Accept": TABLE})
    cells = dict(
        zip([c["name"] for c in body["columnDefinitions"]], body["rows"][0]["cells"], strict=False)
    )
    assert cells["External-IP"] in ("<pending>",) or cells["External-IP"][0].isdigit()
    assert cells["Port(s)"].startswith("80:") and cells["Port(s)"].endswith("/TCP")
    # kinds without a printer get the generic table, like the real server
    raw.json(
        "POST",
        f"/api/v1/namespaces/{ns}/limitranges",
        {"metadata": {"name": "lr"}, "spec": {"limits": []}},
    )
    _, body = raw.json("GET", f"/api/v1/namespaces/{ns}/limitranges", headers={"Accept": TABLE})
    assert [c["name"] for c in body["columnDefinitions"]] == ["Name", "Created At"]


def test_table_watch_sends_headers_once(kubesim, raw, kube_namespace):
    from tests.kubesim.cluster_helpers import stream_lines

    path = f"/api/v1/namespaces/{kube_namespace}/configmaps"
    for name in ("a", "b"):
        raw.json("POST", path, {"metadata": {"name": name}})
    _, events = stream_lines(kubesim, path + "?watch=1&timeoutSeconds=1", headers={"Accept": TABLE})
    assert [e["object"]["kind"] for e in events] == ["Table", "Table"]
    assert "columnDefinitions" in events[0]["object"]
    assert "columnDefinitions" not in events[1]["object"]
    assert events[1]["object"]["rows"][0]["cells"][0] == "b"


def test_plain_json_without_table_accept(raw, kube_namespace):
    status, headers, data = raw.request("GET", f"/api/v1/namespaces/{kube_namespace}/pods")
    assert status == 200 and json.loads(data)["kind"] == "PodList"
