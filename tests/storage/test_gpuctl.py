"""`gpuctl volumes` and `gpuctl launch --mount` against the live portal, the real Keystone and
kubesim (tasks inline): a researcher makes a volume, lists it bound, grows it, launches a
notebook mounting it by name, cannot delete it while the notebook lives (exit 1, the API's
conflict), and deletes it after; a name no volume has is not found (exit 6)."""

from __future__ import annotations

import json

from storage.models import StorageClass, Volume
from tests.support.gpuctl import live, portal, run  # noqa: F401 - the fixture
from workloads.models import Workload


@live
def test_a_researchers_volume_from_make_to_mount_to_delete(portal):  # noqa: F811
    StorageClass.objects.create(name="standard", description="fast SSD", expandable=True,
                                is_default=True)
    code, out, err = run(["volumes", "create", "datasets", "--size", "5", "--json"], portal)
    assert code == 0, err
    made = json.loads(out)
    assert (made["name"], made["scope"], made["size_gib"]) == ("datasets", "user", 5)

    # the tracker is not running here: its part is tests/storage/test_claims.py's; the
    # volume's state is written as it would write it once the claim is bound
    Volume.objects.filter(pk=made["id"]).update(state=Volume.State.BOUND)
    code, out, err = run(["volumes", "--json"], portal)
    assert code == 0, err
    assert [(r["name"], r["state"], r["storage_class"]) for r in json.loads(out)] == \
        [("datasets", "bound", "standard")]
    code, out, err = run(["volumes"], portal)
    assert code == 0 and "datasets" in out and "bound" in out, err
    code, out, err = run(["volumes", "grow", "datasets", "--size", "8"], portal)
    assert code == 0, err
    assert Volume.objects.get(pk=made["id"]).size_gib == 8

    code, out, err = run(["launch", "--template", "jupyter", "--gpu-type", "a100",
                          "--name", "with data", "--mount", "datasets:/data:ro", "--json"],
                         portal)
    assert code == 0, err
    launched = json.loads(out)
    assert launched["mounts"] == [{"volume": made["id"], "dataset": None, "name": "datasets",
                                   "claim_name": made["claim_name"], "path": "/data",
                                   "read_only": True}]
    code, out, err = run(["show", str(launched["id"])], portal)
    assert code == 0 and "datasets" in out and "read-only" in out, err

    code, out, err = run(["volumes", "rm", "datasets"], portal)
    assert code == 1 and "is mounted by" in err, (code, err)
    Workload.objects.filter(pk=launched["id"]).update(state=Workload.State.STOPPED)
    code, out, err = run(["volumes", "rm", "datasets"], portal)
    assert code == 0 and "deleted" in out, err
    code, out, err = run(["volumes", "rm", "datasets"], portal)
    assert code == 6 and "No volume 'datasets'" in err, (code, err)
