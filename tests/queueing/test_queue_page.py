"""The admins' queue page (/admin/queues/): the rows from ClusterQueues (pure), and the page."""

from __future__ import annotations

import pytest

from workloads.admin_views import QueueRow, queue_rows

A100 = "gpu-a100"


def cluster_queue(name: str, nominal: int, used: int = 0, borrowed: int = 0,
                  lending: int | None = None, share: str = "") -> dict:
    resource = {"name": "nvidia.com/gpu", "nominalQuota": str(nominal)}
    if lending is not None:
        resource["lendingLimit"] = str(lending)
    status = {"flavorsUsage": [{"name": A100, "resources": [
        {"name": "nvidia.com/gpu", "total": str(used), "borrowed": str(borrowed)}]}]}
    if share:
        status["fairSharing"] = {"weightedShare": share}
    return {"metadata": {"name": name},
            "spec": {"resourceGroups": [
                {"coveredResources": ["cpu", "memory"], "flavors": [{"name": "gpu-portal-cpu",
                                                                      "resources": []}]},
                {"coveredResources": ["nvidia.com/gpu"],
                 "flavors": [{"name": A100, "resources": [resource]}]}]},
            "status": status}


def test_rows_say_quota_use_borrowing_lending_and_what_waits():
    queues = [cluster_queue("gp-a", 4, used=6, borrowed=2, share="150"),
              cluster_queue("gp-b", 4, used=0, lending=3),
              cluster_queue("gp-c", 0)]
    rows = queue_rows(queues, ["a100", "t4"], {"gp-a": "Team A", "gp-b": "Team B"},
                      {("gp-b", "a100"): (2, 5)})
    assert list(rows) == ["a100"]  # no queue holds or waits for a T4
    assert rows["a100"] == [
        QueueRow("Team A", nominal=4, used=6, borrowed=2, lendable=0, weighted_share="150"),
        # idle 4, but it lends at most 3; two launches for 5 GPUs wait
        QueueRow("Team B", nominal=4, used=0, borrowed=0, lendable=3, queued_workloads=2,
                 queued_gpus=5),
    ]


@pytest.mark.django_db
def test_the_page_is_for_admins_and_says_queueing_is_off_on_kubesim(login, gpu_types, cluster):
    researcher = login("researcher")
    assert researcher.get("/admin/queues/").status_code == 403
    page = login("admin").get("/admin/queues/")
    assert page.status_code == 200
    text = page.content.decode()
    assert "Queueing is off" in text and "Reclaims" in text
