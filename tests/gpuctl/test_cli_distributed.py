"""gpuctl for distributed training: --nodes and the program after --, a group's
nodes × GPUs and ranks in show and list, logs per rank, and the refusal where the cluster has no
engine (kubesim serves neither JobSet nor the MPI operator) — against a live portal and the
real Keystone, as tests/gpuctl/test_cli.py."""

from __future__ import annotations

import json

from gpuctl import cli
from gpuctl.commands.workload import launch_body
from tenants.models import Tenant
from tests.fixtures import factories
from tests.support.gpuctl import live, run
from workloads.models import Workload

RANKS = [  # as the tracker records them: an MPIJob's launcher and two workers
    {"rank": None, "role": "launcher", "pod": "mpi-7-launcher", "node": "gpu-a100-0",
     "state": "running", "reason": "", "exit_code": None},
    {"rank": 1, "role": "worker", "pod": "mpi-7-worker-1", "node": "gpu-a100-1",
     "state": "failed", "reason": "Error", "exit_code": 2},
    {"rank": 0, "role": "worker", "pod": "mpi-7-worker-0", "node": "gpu-a100-0",
     "state": "running", "reason": "", "exit_code": None},
]


def launch_args(*argv: str):
    return cli.build_parser().parse_args(["launch", "--gpu-type", "a100", *argv])


def test_the_program_after_the_double_dash_and_the_nodes_make_the_body():
    body = launch_body(launch_args("--template", "pytorch-ddp", "--nodes", "2", "--gpus",
                                       "4", "--", "python", "train.py", "--lr", "0.1 0.2"))
    assert body == {"name": "pytorch-ddp-a100", "template": "pytorch-ddp", "gpu_type": "a100",
                    "gpu_count": 4, "nodes": 2,
                    "command": ["python", "train.py", "--lr", "0.1 0.2"]}
    # --command as before (split like a shell), no nodes unless asked
    body = launch_body(launch_args("--template", "custom", "--command", "python -c 'x'"))
    assert body["command"] == ["python", "-c", "x"] and "nodes" not in body
    # not both: a usage error, before any configuration is looked for
    code, _, err = run(["launch", "--gpu-type", "a100", "--template", "mpi", "--command", "a",
                        "--", "b"], {})
    assert code == 2 and "argument -- PROGRAM: not allowed with argument --command" in err


def test_rank_is_a_number_or_the_launcher():
    assert cli.build_parser().parse_args(["logs", "7", "--rank", "launcher"]).rank == "launcher"
    assert cli.build_parser().parse_args(["logs", "7", "--rank", "2"]).rank == "2"
    assert run(["logs", "7", "--rank", "two"], {})[0] == 2


@live
def test_a_distributed_launch_where_the_cluster_has_no_engine_exits_1_naming_it(portal):
    """The portal's detail says what is missing and what to do; gpuctl prints it as it came."""
    code, out, err = run(["launch", "--template", "pytorch-ddp", "--gpu-type", "a100",
                          "--gpus", "2", "--nodes", "2", "--", "python", "train.py"], portal)
    assert code == 1 and out == ""
    assert err.startswith("gpuctl: Distributed training is unavailable: this cluster does not "
                          "run JobSet"), err
    assert "An admin can install it" in err and err.endswith(" (400 distributed_unavailable)\n")
    assert not Workload.objects.exists()
    # nodes on a one-pod template: the API's field error, exit 1
    code, _, err = run(["launch", "--template", "jupyter", "--gpu-type", "a100", "--nodes", "2"],
                       portal)
    assert code == 1 and "nodes: The Jupyter template runs on one node" in err


@live
def test_show_and_list_print_a_group_and_its_ranks(portal):
    tenant = Tenant.objects.get(name="vision-lab")
    group = factories.make_workload(tenant, "researcher", name="allreduce", template="mpi",
                                    kind="batch", port=None, gpu_count=4, nodes=2, ranks=RANKS,
                                    image="docker.io/mpioperator/openmpi:v0.8.2",
                                    launch_spec={"engine": "mpi", "nodes": 2})
    code, out, err = run(["show", str(group.pk)], portal)
    assert code == 0, err
    record, ranks = out.split("\n\n")
    fields = dict((*line.split(None, 1), "")[:2] for line in record.splitlines())
    assert (fields["nodes"], fields["gpu_count"], fields["gpus"]) == \
        ("2", "4", "2 nodes × 4× a100 (8 GPUs)")
    lines = ranks.splitlines()
    assert lines[0] == "ranks: 1 of 2 running"
    assert [line.split() for line in lines[1:]] == [
        ["RANK", "POD", "NODE", "STATE", "REASON", "EXIT", "CODE"],
        ["0", "mpi-7-worker-0", "gpu-a100-0", "running", "-", "-"],
        ["1", "mpi-7-worker-1", "gpu-a100-1", "failed", "Error", "2"],
        ["launcher", "mpi-7-launcher", "gpu-a100-0", "running", "-", "-"]]
    code, out, _ = run(["list"], portal)
    row = next(line for line in out.splitlines() if line.split()[:2] == [str(group.pk),
                                                                          "allreduce"])
    assert "2 nodes × 4× a100 (8 GPUs)" in row
    code, out, _ = run(["-o", "json", "show", str(group.pk)], portal)
    shown = json.loads(out)
    assert (shown["nodes"], len(shown["ranks"])) == (2, 3)
    # a one-pod workload: no ranks table
    single = factories.make_workload(tenant, "researcher", name="nb")
    code, out, _ = run(["show", str(single.pk)], portal)
    assert code == 0 and "ranks:" not in out and "\nnodes " in out
