"""`gpuctl clusters list|show`, the clusters column of `gpuctl gpu-types` and `gpuctl launch
--cluster`, against the live portal, the real Keystone, the session's kubesim and east."""

from __future__ import annotations

import json

from django.contrib.auth import get_user_model

from clusters.services import cluster_probe_one, cluster_register
from tests.support.gpuctl import live, openrc, portal, run  # noqa: F401 - the fixture


@live
def test_clusters_gpu_types_and_a_launch_that_names_its_cluster(portal, keystone, live_server,  # noqa: F811
                                                                east, h100):
    code, out, err = run(["gpu-types"], portal)  # one cluster: no column repeating the figures
    assert code == 0 and "CLUSTERS" not in out.splitlines()[0], err
    root = get_user_model().objects.create(username="id-root", name="root")
    east_row = cluster_register(user=root, fields={"name": "east",
                                                   "kubeconfig_path": east.kubeconfig})
    assert cluster_probe_one(cluster_id=east_row.pk).state == "ready"

    code, out, err = run(["clusters"], portal)
    assert code == 0, err
    lines = [line.split() for line in out.splitlines()]
    assert lines[0][:2] == ["NAME", "STATE"]
    assert lines[1][:2] == ["main", "ready"] and lines[2] == ["east", "ready", "h100", "16"]
    code, out, err = run(["clusters", "show", "east", "--json"], portal)
    assert code == 0 and json.loads(out)["gpu_types"] == {"h100": 16}, err
    assert "credentials" not in json.loads(out)  # an admin's to read
    admin = openrc(keystone, live_server, user="admin", project="admin")
    code, out, err = run(["clusters", "show", "east"], admin)
    assert code == 0 and f"kubeconfig file {east.kubeconfig}" in out, err
    code, _, err = run(["clusters", "show", "west"], portal)
    assert code != 0 and "west" in err

    code, out, err = run(["gpu-types"], portal)
    assert code == 0, err
    rows = {line.split()[0]: line for line in out.splitlines()}
    assert "CLUSTERS" in rows["SLUG"]
    assert "east 16/16" in rows["h100"] and "main 16/16" in rows["a100"]

    code, out, err = run(["launch", "--template", "jupyter", "--gpu-type", "a100",
                          "--cluster", "main", "--json"], portal)
    assert code == 0 and json.loads(out)["cluster"] == "main", err
    launched = json.loads(out)["id"]
    code, out, err = run(["list"], portal)  # each workload's cluster in a column of its own
    assert code == 0, err
    header, *rows = out.splitlines()
    at = header.index("CLUSTER")  # the columns are aligned under their headers
    assert [row[at:].split()[0] for row in rows if row.split()[0] == str(launched)] == ["main"]
    code, out, err = run(["launch", "--template", "jupyter", "--gpu-type", "a100",
                          "--cluster", "east"], portal)
    assert code != 0 and "offers no a100" in err, (code, err)


@live
def test_an_admin_registers_changes_and_removes_a_cluster_from_the_command_line(
        portal, keystone, live_server, east, h100):  # noqa: F811
    from clusters.models import Cluster

    admin = openrc(keystone, live_server, user="admin", project="admin")
    code, _, err = run(["clusters", "add", "east", "--kubeconfig", east.kubeconfig], portal)
    assert code == 1 and "permission_denied" in err  # a member's portal: no admin's verbs
    assert not Cluster.objects.filter(name="east").exists()
    code, _, err = run(["clusters", "add", "East!", "--kubeconfig", east.kubeconfig], admin)
    assert code != 0 and "name" in err and not Cluster.objects.filter(name="East!").exists()

    code, out, err = run(["clusters", "add", "east", "--kubeconfig", east.kubeconfig,
                          "--display-name", "East campus", "--gpu-type", "h100"], admin)
    assert code == 0 and out.startswith("cluster east registered"), err
    east_row = Cluster.objects.get(name="east")
    assert (east_row.kubeconfig_path, east_row.display_name, east_row.gpu_types,
            east_row.enabled) == (east.kubeconfig, "East campus", ["h100"], True)

    code, out, err = run(["clusters", "set", "east", "--disable", "--json"], admin)
    assert code == 0 and json.loads(out)["enabled"] is False, err
    east_row.refresh_from_db()
    assert (east_row.enabled, east_row.display_name) == (False, "East campus")  # the rest kept
    code, _, err = run(["clusters", "set", "east", "--enable", "--disable"], admin)
    assert code == 2 and "not allowed with" in err  # argparse's refusal, nothing sent
    code, _, err = run(["clusters", "set", "main", "--kubeconfig", "relative/path"], admin)
    assert code != 0 and "kubeconfig_path" in err

    code, out, err = run(["clusters", "remove", "east"], admin)
    assert code == 0 and "east removed" in out, err
    assert not Cluster.objects.filter(name="east").exists()
    code, _, err = run(["clusters", "remove", "main"], admin)
    assert code != 0 and "home cluster" in err
