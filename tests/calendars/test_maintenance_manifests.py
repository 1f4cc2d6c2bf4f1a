"""The nodes a launch must avoid (a maintenance window it would cross) as every kind's pods
carry them: a required node affinity `kubernetes.io/hostname NotIn`, merged with the one-per-node
anti-affinity of a group's pods. Pure make_* functions, compared as dicts."""

from __future__ import annotations

import dataclasses

from tests.support.manifests import DDP, MPIJOB
from workloads.manifests import make_deployment, make_job, make_jobset, make_mpijob

AVOID = ("gpu-a100-2", "gpu-a100-1")
NOT_THERE = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
    "nodeSelectorTerms": [{"matchExpressions": [
        {"key": "kubernetes.io/hostname", "operator": "NotIn",
         "values": ["gpu-a100-1", "gpu-a100-2"]}]}]}}}


def test_a_job_and_a_deployment_keep_off_the_nodes():
    batch = dataclasses.replace(DDP, engine="", nodes=1, kind="batch", avoid_nodes=AVOID)
    assert make_job(batch)["spec"]["template"]["spec"]["affinity"] == NOT_THERE
    service = dataclasses.replace(batch, kind="service", port=8888)
    assert make_deployment(service)["spec"]["template"]["spec"]["affinity"] == NOT_THERE
    # nothing to avoid: no affinity at all, as before
    assert "affinity" not in make_job(dataclasses.replace(batch, avoid_nodes=()))["spec"][
        "template"]["spec"]


def test_a_group_keeps_one_pod_per_node_and_off_the_nodes():
    pod = make_jobset(dataclasses.replace(DDP, avoid_nodes=AVOID))["spec"]["replicatedJobs"][0][
        "template"]["spec"]["template"]["spec"]
    plain = make_jobset(DDP)["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert pod["affinity"] == {**NOT_THERE, **plain["affinity"]}
    specs = make_mpijob(dataclasses.replace(MPIJOB, avoid_nodes=AVOID))["spec"]["mpiReplicaSpecs"]
    plain_worker = make_mpijob(MPIJOB)["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]
    assert specs["Worker"]["template"]["spec"]["affinity"] == {**NOT_THERE,
                                                               **plain_worker["affinity"]}
    assert "podAntiAffinity" in plain_worker["affinity"]
    # the launcher (no GPU, any node) keeps off them too: the window stops what runs there
    assert specs["Launcher"]["template"]["spec"]["affinity"] == NOT_THERE
