"""The pages for distributed training on kubesim, which serves neither JobSet nor the
MPI operator: the launch page shows pytorch-ddp and mpi disabled with the reason, the form wraps
the API's rules (a group refused on the template field, nodes refused on a one-pod template), the
live check counts across nodes, the workload page shows a group's ranks, lists show N × G, and
the admin queue page a queued group as one entry. Real Keystone logins, PostgreSQL, kubesim."""

import re

import pytest

from kube.engines import engine_refusal
from tests.support.pages import field_error, launch_form, make_workload
from workloads.models import Workload

pytestmark = pytest.mark.django_db


DDP_FORM = {"name": "ddp", "template": "pytorch-ddp", "shown_template": "pytorch-ddp",
            "gpu_count": "4", "nodes": "2", "command": "python\ntrain.py", "cpu": "8",
            "memory": "64"}
RANKS = [  # as the tracker records them (an MPIJob: the launcher and two workers)
    {"rank": None, "role": "launcher", "pod": "wl-mpi-launcher-x1", "node": "gpu-a100-0",
     "state": "running", "reason": "", "exit_code": None},
    {"rank": 1, "role": "worker", "pod": "wl-mpi-worker-1", "node": "gpu-a100-1",
     "state": "failed", "reason": "OOMKilled", "exit_code": 137},
    {"rank": 0, "role": "worker", "pod": "wl-mpi-worker-0", "node": "gpu-a100-0",
     "state": "running", "reason": "", "exit_code": None},
]


def test_the_distributed_templates_are_shown_unavailable_with_the_engines_reason(researcher):
    page = researcher.get("/workloads/new/").content.decode()
    for slug, engine in (("pytorch-ddp", "jobset"), ("mpi", "mpi")):
        radio = re.search(rf'<input type="radio"[^>]*value="{slug}"[^>]*>', page).group(0)
        assert " disabled" in radio and " checked" not in radio
        assert f"unavailable-{slug}" in radio  # the reason describes the choice
        reason = re.search(rf'<small id="unavailable-{slug}"[^>]*>(.*?)</small>', page,
                           re.S).group(1)
        assert reason == f"<strong>Unavailable here:</strong> {engine_refusal(engine)}"
    assert "does not run JobSet" in page and "does not run the MPI operator" in page
    # one-pod templates stay choosable, one of them chosen; no nodes field for it
    chosen = re.findall(r'<input type="radio"[^>]*value="([^"]+)" checked', page)
    assert len(chosen) == 1 and chosen[0] not in ("pytorch-ddp", "mpi")
    assert '<div class="field" id="nodes-field" hidden>' in page and 'id="id_nodes"' not in page
    assert '<span id="gpu-count-label">GPUs</span>' in page
    # asked for by name, an unavailable template is not chosen either
    page = researcher.get("/workloads/new/?template=pytorch-ddp").content.decode()
    assert not re.search(r'value="pytorch-ddp" checked', page)


def test_a_distributed_templates_fields_bring_the_nodes_beside_gpus_per_node(researcher):
    """htmx: the template's fields, and out of band the nodes field and the GPU count's label."""
    partial = researcher.post("/workloads/new/fields/", launch_form(template="pytorch-ddp"),
                              HTTP_HX_REQUEST="true").content.decode()
    assert partial.startswith('<div id="template-fields">')
    assert '<span id="gpu-count-label" hx-swap-oob="true">GPUs per node</span>' in partial
    nodes = re.search(r'<div class="field" id="nodes-field" hx-swap-oob="true">(.*?)</div>',
                      partial, re.S).group(1)
    assert '<label for="id_nodes">× Nodes</label>' in nodes
    assert 'name="nodes" type="number" min="1" max="64"' in nodes and 'value="1"' in nodes
    assert "GPUs per node × nodes" in nodes
    assert 'hx-get="/workloads/new/check/"' in nodes  # the live check follows the nodes too
    # its program, retries and environment (as the custom template's), under torchrun
    for field in ("command", "args", "env", "retries", "image"):
        assert f'<label for="id_{field}">' in partial
    assert "torchrun" in partial and "NODE_RANK" in partial
    assert '<label for="id_kind">' not in partial and '<label for="id_port">' not in partial
    mpi = researcher.post("/workloads/new/fields/", launch_form(template="mpi"),
                          HTTP_HX_REQUEST="true").content.decode()
    assert "mpirun" in mpi and 'id="id_nodes"' in mpi
    # back to a one-pod template: the nodes field goes, the label says GPUs
    partial = researcher.post("/workloads/new/fields/", launch_form(template="jupyter"),
                              HTTP_HX_REQUEST="true").content.decode()
    assert '<div class="field" id="nodes-field" hx-swap-oob="true" hidden>' in partial
    assert 'id="id_nodes"' not in partial
    assert '<span id="gpu-count-label" hx-swap-oob="true">GPUs</span>' in partial


def test_a_distributed_launch_where_the_engine_is_absent_is_refused_on_the_template(researcher):
    response = researcher.post("/workloads/new/", launch_form(**DDP_FORM))
    assert response.status_code == 400
    page = response.content.decode()
    assert field_error(page, "template") == f"<p>{engine_refusal('jobset')}</p>"
    assert '<a href="#id_template">Template</a>: Distributed training is unavailable' in page
    # what was typed is kept: the nodes beside GPUs per node, the program
    assert re.search(r'id="id_nodes" name="nodes"[^>]*value="2"', page)
    assert "GPUs per node" in page and "python\ntrain.py</textarea>" in page
    assert not Workload.objects.exists()


def test_the_form_refuses_nodes_on_a_one_pod_template_and_launches_one_pod_as_before(
        researcher, vision_lab):
    response = researcher.post("/workloads/new/", launch_form(name="nb", nodes="2"))
    assert response.status_code == 400
    assert ('<a href="#id_nodes">Nodes</a>: The Jupyter template runs on one node; launch '
            "pytorch-ddp or mpi to span several.") in response.content.decode()
    assert not Workload.objects.exists()
    response = researcher.post("/workloads/new/", launch_form(name="nb", nodes="1"))
    assert response.status_code == 302
    workload = Workload.objects.get()
    assert (workload.nodes, workload.gpu_count, workload.ranks) == (1, 1, [])
    page = researcher.get(response["Location"]).content.decode()
    assert "nb was submitted: 1× a100, Jupyter." in page
    assert 'id="workload-ranks-card"' not in page and 'id="log-rank"' not in page


def test_the_live_check_counts_the_gpus_of_every_node(researcher):
    """kubesim: two nodes of 8 a100s; vision-lab may hold 4 a100s."""
    def check(**params) -> str:
        return researcher.get("/workloads/new/check/", {"gpu_type": "a100", **params}
                              ).content.decode()

    text = check(gpu_count="4", nodes="2", template="pytorch-ddp")
    summary = re.search(r'<p class="check-note check-info">(.*?)</p>', text).group(1)
    assert re.fullmatch(r"2 nodes × 4 a100: 8 GPUs of the quota; [012] nodes? ha(s|ve) 4 free "
                        r"now", summary), summary
    assert "vision-lab uses 0 of 4 a100 GPUs; 8 more would exceed it." in text
    text = check(gpu_count="2", nodes="2", template="mpi")
    assert "2 nodes × 2 a100: 4 GPUs of the quota" in text and "would exceed" not in text
    text = check(gpu_count="8", nodes="3", template="pytorch-ddp")
    assert ("<strong>Can never run:</strong> Needs 3 nodes with 8 a100 GPUs each; the cluster "
            "has 2 such nodes, so this request can never run.") in text
    assert "Give the number of nodes" in check(gpu_count="1", nodes="x", template="mpi")
    # a one-pod template counts one node, whatever the field said before it was changed
    text = check(gpu_count="4", nodes="2", template="jupyter")
    assert "nodes ×" not in text and "would exceed" not in text


def test_the_workload_page_shows_a_groups_ranks_launcher_last(researcher, vision_lab):
    workload = make_workload(vision_lab, "researcher", name="allreduce", template="mpi",
                             kind="batch", port=None, gpu_count=4, nodes=2, ranks=RANKS,
                             launch_spec={"engine": "mpi", "nodes": 2})
    page = researcher.get(f"/workloads/{workload.pk}/").content.decode()
    assert '<dd id="workload-gpus">2 nodes × 4× a100 (8 GPUs)' in page
    assert "4 on each node" in page
    assert '<span class="muted small" id="ranks-running">(1 of 2 running)</span>' in page
    table = re.search(r'<table class="data" id="workload-ranks">(.*?)</table>', page,
                      re.S).group(1)
    rows = [re.sub(r"<[^>]+>", "|", row).replace("||", "|").strip("|").split("|")
            for row in re.findall(r"<tr id=\"rank-[^\"]+\">(.*?)</tr>", table, re.S)]
    rows = [[cell.strip() for cell in row if cell.strip()] for row in rows]
    assert rows == [["0", "wl-mpi-worker-0", "gpu-a100-0", "running"],
                    ["1", "wl-mpi-worker-1", "gpu-a100-1", "failed", "OOMKilled", "137"],
                    ["launcher", "wl-mpi-launcher-x1", "gpu-a100-0", "running"]]
    # the log viewer chooses a rank (without JavaScript: a GET form; with it, htmx)
    choice = re.search(r'<form method="get"[^>]*id="log-rank".*?</form>', page, re.S).group(0)
    assert f'hx-get="/workloads/{workload.pk}/live/"' in choice
    assert re.findall(r'<option value="([^"]*)"', choice) == ["", "0", "1", "launcher"]
    # the live refresh carries the same table
    live = researcher.get(f"/workloads/{workload.pk}/live/").content.decode()
    assert 'id="workload-ranks"' in live and "OOMKilled" in live
    assert f'hx-get="/workloads/{workload.pk}/live/"' in live
    # the list: N × G
    rows = researcher.get("/workloads/").content.decode()
    assert re.search(rf'<tr id="workload-{workload.pk}">.*?<td class="num">2 × 4 × a100</td>',
                     rows, re.S)


def test_a_group_without_pods_yet_says_it_starts_whole(researcher, vision_lab):
    workload = make_workload(vision_lab, "researcher", name="waiting", template="pytorch-ddp",
                             kind="batch", port=None, gpu_count=2, nodes=3,
                             state=Workload.State.QUEUED,
                             launch_spec={"engine": "jobset", "nodes": 3})
    page = researcher.get(f"/workloads/{workload.pk}/").content.decode()
    assert "3 nodes × 2× a100 (6 GPUs)" in page and "(0 of 3 running)" in page
    assert "No pods yet: the group starts whole" in page
    assert 'id="log-rank"' not in page


def test_the_admin_queue_page_shows_a_queued_group_as_one_entry(vision_lab, login):
    group = make_workload(vision_lab, "researcher", name="big ddp", template="pytorch-ddp",
                          kind="batch", port=None, gpu_count=4, nodes=2,
                          state=Workload.State.QUEUED,
                          launch_spec={"engine": "jobset", "nodes": 2})
    single = make_workload(vision_lab, "researcher", name="one notebook",
                           state=Workload.State.QUEUED)
    page = login("admin").get("/admin/queues/").content.decode()
    table = re.search(r'<table class="data" id="waiting-workloads">(.*?)</table>', page,
                      re.S).group(1)
    assert table.count("<tr id=\"waiting-") == 2
    assert re.search(rf'<tr id="waiting-{group.pk}"><th scope="row">big ddp</th>'
                     r'<td>vision-lab</td><td>researcher</td>'
                     r'<td class="num">2 nodes × 4× a100 \(8 GPUs\)</td><td class="num">2</td>',
                     table)
    assert re.search(rf'<tr id="waiting-{single.pk}"><th scope="row">one notebook</th>'
                     r'.*?<td class="num">1× a100</td><td class="num">1</td>', table)
