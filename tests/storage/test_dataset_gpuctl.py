"""`gpuctl datasets` and `gpuctl launch --dataset` against the live portal, the real Keystone
and kubesim (tasks inline): an admin publishes a dataset to vision-lab (an NFS export) and one
to every project (an S3 bucket); a researcher lists and shows them, launches a notebook with
one at its default path and one at a path of their own, both read-only; the admin cannot
withdraw it while the notebook lives (exit 1, the API's conflict) and can after; a researcher
publishes nothing (exit 1, refused); a name no dataset has is not found (exit 6)."""

from __future__ import annotations

import json

from storage.models import Dataset
from tests.support.gpuctl import live, openrc, portal, run  # noqa: F401 - the fixture
from workloads.models import Workload


@live
def test_datasets_from_publishing_to_mount_to_withdrawal(
        portal, keystone, live_server, s3_server, s3_bucket):  # noqa: F811
    admin = openrc(keystone, live_server, user="admin", project="admin")
    code, out, err = run(["datasets", "create", "imagenet", "--size", "150", "--nfs",
                          "nfs.example.org:/exports/imagenet", "--description", "ILSVRC 2012",
                          "--project", "vision-lab", "--json"], admin)
    assert code == 0, err
    imagenet = json.loads(out)
    assert (imagenet["kind"], imagenet["source"], imagenet["projects"][0]["name"]) == (
        "nfs", {"server": "nfs.example.org", "path": "/exports/imagenet"}, "vision-lab")
    code, out, err = run(["datasets", "create", "corpora", "--size", "900", "--s3",
                          f"s3://{s3_bucket.name}/text/", "--endpoint", s3_server.endpoint,
                          "--all-projects"], admin)
    assert code == 0 and "corpora" in out, err

    code, out, err = run(["datasets", "--json"], portal)
    assert code == 0, err
    assert [(d["name"], d["read_only"]) for d in json.loads(out)] == [("corpora", True),
                                                                      ("imagenet", True)]
    code, out, err = run(["datasets", "show", "imagenet"], portal)
    assert code == 0 and "/datasets/imagenet" in out and "ILSVRC 2012" in out, err
    code, out, err = run(["datasets", "create", "mine", "--size", "1", "--nfs", "h:/x",
                          "--all-projects"], portal)
    assert code == 1 and "Only admins" in err, (code, err)

    code, out, err = run(["launch", "--template", "jupyter", "--gpu-type", "a100", "--name",
                          "with data", "--dataset", "imagenet", "--dataset", "corpora:/text",
                          "--json"], portal)
    assert code == 0, err
    launched = json.loads(out)
    assert sorted((m["name"], m["path"], m["read_only"]) for m in launched["mounts"]) == [
        ("corpora", "/text", True), ("imagenet", "/datasets/imagenet", True)]
    code, out, err = run(["show", str(launched["id"])], portal)
    assert code == 0 and "dataset imagenet" in out and "read-only" in out, err

    code, out, err = run(["datasets", "rm", "imagenet"], admin)
    assert code == 1 and "is mounted by" in err, (code, err)
    Workload.objects.filter(pk=launched["id"]).update(state=Workload.State.STOPPED)
    code, out, err = run(["datasets", "rm", "imagenet"], admin)
    assert code == 0 and "withdrawn" in out, err
    assert not Dataset.objects.filter(name="imagenet").exists()
    code, out, err = run(["launch", "--template", "jupyter", "--gpu-type", "a100",
                          "--dataset", "imagenet"], portal)
    assert code == 6 and "No dataset 'imagenet'" in err, (code, err)
