"""A distributed workload's objects as pure functions: a `pytorch-ddp` JobSet and an
`mpi` MPIJob, as exact dicts, against their CRDs' schemas (JobSet v0.12.0's and the MPI
operator v0.8.2's, read from the Go module cache), their pods against the Kubernetes schema
and Pod Security "restricted", and the names the engines' own webhooks check."""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from kube.labels import MAX_GROUP_OBJECT_NAME, MAX_OBJECT_NAME, workload_object_name
from tests.support.manifests import DDP, MPIJOB
from workloads.manifests import (
    JOBSET,
    WorkloadSpec,
    make_group_network_policy,
    make_jobset,
    make_mpijob,
    master_addr,
    workload_objects,
)

QUEUE = (("kueue.x-k8s.io/queue-name", "gpu-vision-lab-abc123"),
         ("kueue.x-k8s.io/priority-class", "gpu-portal-normal"))


LABELS_51 = {
    "app.kubernetes.io/managed-by": "gpu-portal",
    "app.kubernetes.io/name": "pytorch-ddp",
    "app.kubernetes.io/instance": "wl-51-resnet",
    "gpu-portal.io/workload-id": "51",
    "gpu-portal.io/project-id": "d964ebf8619749c3",
    "gpu-portal.io/owner": "researcher",
    "gpu-portal.io/owner-id": "5e1f0c6b2a",
}
LABELS_52 = {**LABELS_51, "app.kubernetes.io/name": "mpi",
             "app.kubernetes.io/instance": "wl-52-allreduce", "gpu-portal.io/workload-id": "52"}
POD_SECURITY = {"seccompProfile": {"type": "RuntimeDefault"}, "runAsNonRoot": True,
                "runAsUser": 1000, "fsGroup": 1000}
CONTAINER_SECURITY = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
GPU_TOLERATION = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
MOUNTS = [{"name": "dshm", "mountPath": "/dev/shm"},
          {"name": "home", "mountPath": "/home/portal"}]
VOLUMES = [{"name": "dshm", "emptyDir": {"medium": "Memory"}},
           {"name": "home", "persistentVolumeClaim": {"claimName": "gpu-portal-home"}}]


def resources(cpu: str, memory: str, gpus: int = 0) -> dict[str, Any]:
    amounts = {"cpu": cpu, "memory": memory, **({"nvidia.com/gpu": str(gpus)} if gpus else {})}
    return {"limits": dict(amounts), "requests": dict(amounts)}


def one_per_node(match: dict[str, str]) -> dict[str, Any]:
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": match}, "topologyKey": "kubernetes.io/hostname"}]}}


# --- the JobSet ------------------------------------------------------------------------------

TORCHRUN = ["torchrun", "--nnodes=$(WORLD_SIZE)", "--nproc-per-node=$(NPROC_PER_NODE)",
            "--node-rank=$(NODE_RANK)", "--master-addr=$(MASTER_ADDR)",
            "--master-port=$(MASTER_PORT)", "--no-python",
            "python", "/home/portal/train.py", "--epochs", "3"]


def test_a_two_node_pytorch_jobset():
    assert make_jobset(DDP) == {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "wl-51-resnet", "namespace": "gpu-vision-lab-abc123",
                     "labels": LABELS_51},
        "spec": {
            # a headless Service `wl-51-resnet`: every pod's host name resolves in it
            "network": {"enableDNSHostnames": True, "subdomain": "wl-51-resnet"},
            # a failed rank restarts the whole group, up to the launch's retries
            "failurePolicy": {"maxRestarts": 2},
            "ttlSecondsAfterFinished": 600,
            "replicatedJobs": [{"name": "r", "replicas": 1, "template": {"spec": {
                "completionMode": "Indexed",
                "completions": 2,
                "parallelism": 2,
                "backoffLimit": 0,
                "activeDeadlineSeconds": 7200,  # each attempt
                "template": {
                    "metadata": {"labels": LABELS_51},
                    "spec": {
                        "serviceAccountName": "workload",
                        "automountServiceAccountToken": False,
                        "enableServiceLinks": False,
                        "restartPolicy": "Never",
                        "securityContext": POD_SECURITY,
                        "nodeSelector": {"gputype": "a100"},
                        "tolerations": GPU_TOLERATION,
                        # one rank per node: never two pods of workload 51 on one node
                        "affinity": one_per_node({"app.kubernetes.io/managed-by": "gpu-portal",
                                                  "gpu-portal.io/workload-id": "51"}),
                        "containers": [{
                            "name": "app",
                            "image": "nvcr.io/nvidia/pytorch:24.10-py3",
                            "imagePullPolicy": "IfNotPresent",
                            "command": ["torchrun"],
                            "args": TORCHRUN[1:],
                            "env": [
                                {"name": "NCCL_DEBUG", "value": "INFO"},
                                {"name": "MASTER_ADDR", "value": "wl-51-resnet-r-0-0.wl-51-resnet"},
                                {"name": "MASTER_PORT", "value": "29500"},
                                {"name": "WORLD_SIZE", "value": "2"},
                                {"name": "NODE_RANK", "valueFrom": {"fieldRef": {"fieldPath":
                                    "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}},
                                {"name": "NPROC_PER_NODE", "value": "4"},
                            ],
                            "resources": resources("8", "64Gi", 4),
                            "securityContext": CONTAINER_SECURITY,
                            "volumeMounts": MOUNTS,
                        }],
                        "volumes": VOLUMES,
                    },
                },
            }}}],
        },
    }
    assert [o["kind"] for o in workload_objects(DDP)] == ["JobSet"]


def pod_env(env: list[dict[str, Any]], *, completion_index: int) -> dict[str, str]:
    """The variables as the kubelet resolves them for the pod of that completion index (the
    Job controller annotates it so)."""
    annotations = {"batch.kubernetes.io/job-completion-index": str(completion_index)}
    values = {}
    for var in env:
        if "value" in var:
            values[var["name"]] = var["value"]
        else:
            path = var["valueFrom"]["fieldRef"]["fieldPath"]
            key = path.removeprefix("metadata.annotations['").removesuffix("']")
            values[var["name"]] = annotations[key]
    return values


def expand(argv: list[str], env: dict[str, str]) -> list[str]:
    """Kubernetes' $(VAR) expansion of a container's command and args (no shell)."""
    out = []
    for arg in argv:
        for name, value in env.items():
            arg = arg.replace(f"$({name})", value)
        out.append(arg)
    return out


def test_rank_0_and_rank_1_get_their_own_node_rank_and_the_same_rendezvous():
    container = make_jobset(DDP)["spec"]["replicatedJobs"][0]["template"]["spec"][
        "template"]["spec"]["containers"][0]
    rank0 = pod_env(container["env"], completion_index=0)
    rank1 = pod_env(container["env"], completion_index=1)
    common = {"NCCL_DEBUG": "INFO", "MASTER_ADDR": "wl-51-resnet-r-0-0.wl-51-resnet",
              "MASTER_PORT": "29500", "WORLD_SIZE": "2", "NPROC_PER_NODE": "4"}
    assert rank0 == {**common, "NODE_RANK": "0"}
    assert rank1 == {**common, "NODE_RANK": "1"}
    # rank 0's host name is the one JobSet gives the pod of completion index 0
    assert rank0["MASTER_ADDR"].split(".")[0] == "wl-51-resnet-r-0-0"
    assert expand([*container["command"], *container["args"]], rank1) == [
        "torchrun", "--nnodes=2", "--nproc-per-node=4", "--node-rank=1",
        "--master-addr=wl-51-resnet-r-0-0.wl-51-resnet", "--master-port=29500", "--no-python",
        "python", "/home/portal/train.py", "--epochs", "3"]


def test_the_program_reaches_torchrun_as_given():
    odd = dataclasses.replace(DDP, command=("python", "-c", "print('héllo \"world\"; $(id)')"),
                              args=())
    container = make_jobset(odd)["spec"]["replicatedJobs"][0]["template"]["spec"]["template"][
        "spec"]["containers"][0]
    assert container["args"][-3:] == ["python", "-c", "print('héllo \"world\"; $(id)')"]
    assert container["args"][-4] == "--no-python"


def test_a_queued_group_is_created_suspended_with_its_queue():
    jobset = make_jobset(dataclasses.replace(DDP, queue_labels=QUEUE))
    assert jobset["spec"]["suspend"] is True
    assert jobset["metadata"]["labels"] == {**LABELS_51, **dict(QUEUE)}
    assert "suspend" not in make_jobset(DDP)["spec"]
    mpijob = make_mpijob(dataclasses.replace(MPIJOB, queue_labels=QUEUE))
    assert mpijob["spec"]["runPolicy"]["suspend"] is True
    assert mpijob["metadata"]["labels"] == {**LABELS_52, **dict(QUEUE)}
    assert "suspend" not in make_mpijob(MPIJOB)["spec"]["runPolicy"]
    # Kueue admits the group through its JobSet or MPIJob; only the MPI workers carry the
    # queue's label too: the operator creates them as itself, and the tenant's guard admits a
    # GPU pod in a queued namespace only with that label (JobSet's pods come from its Jobs)
    for pod in pod_templates(dataclasses.replace(DDP, queue_labels=QUEUE)):
        assert "kueue.x-k8s.io/queue-name" not in pod["metadata"]["labels"]
    queued = make_mpijob(dataclasses.replace(MPIJOB, queue_labels=QUEUE))["spec"]
    replicas = queued["mpiReplicaSpecs"]
    assert "kueue.x-k8s.io/queue-name" not in \
        replicas["Launcher"]["template"]["metadata"]["labels"]
    assert replicas["Worker"]["template"]["metadata"]["labels"][
        "kueue.x-k8s.io/queue-name"] == dict(QUEUE)["kueue.x-k8s.io/queue-name"]


# --- the MPIJob ------------------------------------------------------------------------------

def test_a_two_worker_mpijob():
    isolated = {**LABELS_52, "gpu-portal.io/isolated": "true"}
    assert make_mpijob(MPIJOB) == {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": "wl-52-allreduce", "namespace": "gpu-vision-lab-abc123",
                     "labels": LABELS_52},
        "spec": {
            "slotsPerWorker": 4,  # one per GPU
            "runPolicy": {"cleanPodPolicy": "Running", "ttlSecondsAfterFinished": 600,
                          "backoffLimit": 2, "activeDeadlineSeconds": 7200},
            "sshAuthMountPath": "/home/mpiuser/.ssh",
            "launcherCreationPolicy": "WaitForWorkersReady",
            "mpiImplementation": "OpenMPI",
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "restartPolicy": "Never", "template": {
                    "metadata": {"labels": isolated},
                    "spec": {
                        "serviceAccountName": "workload",
                        "automountServiceAccountToken": False,
                        "enableServiceLinks": False,
                        "securityContext": POD_SECURITY,
                        # no GPU: no GPU node's selector or toleration, any node will do
                        "containers": [{
                            "name": "app",
                            "image": "docker.io/mpioperator/openmpi:v0.8.2",
                            "imagePullPolicy": "IfNotPresent",
                            "command": ["mpirun"],
                            # 2 workers × 4 slots; the variables passed on to every rank
                            "args": ["-n", "8", "-x", "OMP_NUM_THREADS",
                                     "/home/portal/allreduce", "--iterations", "10"],
                            "env": [{"name": "OMP_NUM_THREADS", "value": "1"}],
                            "resources": resources("1", "1Gi"),
                            "securityContext": CONTAINER_SECURITY,
                            "volumeMounts": MOUNTS,
                        }],
                        "volumes": VOLUMES,
                    },
                }},
                "Worker": {"replicas": 2, "restartPolicy": "Never", "template": {
                    "metadata": {"labels": isolated},
                    "spec": {
                        "serviceAccountName": "workload",
                        "automountServiceAccountToken": False,
                        "enableServiceLinks": False,
                        "securityContext": POD_SECURITY,
                        "nodeSelector": {"gputype": "a100"},
                        "tolerations": GPU_TOLERATION,
                        "affinity": one_per_node({
                            "app.kubernetes.io/managed-by": "gpu-portal",
                            "gpu-portal.io/workload-id": "52",
                            "training.kubeflow.org/job-role": "worker"}),
                        "containers": [{
                            "name": "app",
                            "image": "docker.io/mpioperator/openmpi:v0.8.2",
                            "imagePullPolicy": "IfNotPresent",
                            # the image's SSH server, as its user, on port 2222
                            "command": ["/usr/sbin/sshd"],
                            "args": ["-De", "-f", "/home/mpiuser/.sshd_config"],
                            "env": [{"name": "OMP_NUM_THREADS", "value": "1"}],
                            "ports": [{"name": "ssh", "containerPort": 2222,
                                       "protocol": "TCP"}],
                            "readinessProbe": {"tcpSocket": {"port": "ssh"},
                                               "periodSeconds": 2},
                            "resources": resources("8", "64Gi", 4),
                            "securityContext": CONTAINER_SECURITY,
                            "volumeMounts": MOUNTS,
                        }],
                        "volumes": VOLUMES,
                    },
                }},
            },
        },
    }


def test_the_mpi_group_is_reached_only_by_its_own_pods():
    policy = make_group_network_policy(MPIJOB)
    group = {"podSelector": {"matchLabels": {"app.kubernetes.io/managed-by": "gpu-portal",
                                             "gpu-portal.io/workload-id": "52",
                                             "gpu-portal.io/isolated": "true"}}}
    assert policy == {
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": "wl-52-allreduce", "namespace": "gpu-vision-lab-abc123",
                     "labels": LABELS_52},
        "spec": {**group, "policyTypes": ["Ingress"], "ingress": [{"from": [group]}]},
    }
    # the policy before the group: no pod of it exists unguarded
    assert [o["kind"] for o in workload_objects(MPIJOB)] == ["NetworkPolicy", "MPIJob"]
    # and it picks both the launcher and the workers
    for pod in pod_templates(MPIJOB):
        pod_labels = pod["metadata"]["labels"]
        assert all(pod_labels.get(k) == v
                   for k, v in policy["spec"]["podSelector"]["matchLabels"].items())


# what the MPI operator v0.8.2 adds to its pods (pkg/controller/mpi_job_controller.go):
# volumes, mounts and variables; and the objects it makes beside them
OPERATOR_VOLUMES = {"ssh-auth", "mpi-job-config"}
OPERATOR_MOUNTS = {"/home/mpiuser/.ssh", "/etc/mpi"}
OPERATOR_ENV = {"K_MPI_JOB_ROLE", "OMPI_MCA_orte_keep_fqdn_hostnames",
                "OMPI_MCA_orte_default_hostfile", "OMPI_MCA_plm_rsh_args", "OMPI_MCA_orte_set_default_slots",
                "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES"}


def test_nothing_of_ours_collides_with_what_the_mpi_operator_adds():
    spec = dataclasses.replace(MPIJOB, secret_env=(("WANDB_API_KEY", "k"),))
    for pod in pod_templates(spec):
        pod_spec = pod["spec"]
        assert not {v["name"] for v in pod_spec["volumes"]} & OPERATOR_VOLUMES
        container = pod_spec["containers"][0]
        assert not {m["mountPath"] for m in container["volumeMounts"]} & OPERATOR_MOUNTS
        assert not {e["name"] for e in container["env"]} & OPERATOR_ENV
        assert "hostname" not in pod_spec and "subdomain" not in pod_spec  # the operator's
    # its objects: `<name>-ssh` and `<name>-config`, a Service and a Job `<name>-launcher`
    ours = {(o["kind"], o["metadata"]["name"]) for o in workload_objects(spec)}
    assert ours == {("Secret", "wl-52-allreduce"), ("NetworkPolicy", "wl-52-allreduce"),
                    ("MPIJob", "wl-52-allreduce")}
    # a secret variable reaches the ranks too
    launcher = make_mpijob(spec)["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]
    assert launcher["spec"]["containers"][0]["args"][:6] == [
        "-n", "8", "-x", "OMP_NUM_THREADS", "-x", "WANDB_API_KEY"]


# --- names -----------------------------------------------------------------------------------

def test_the_longest_group_names_pass_the_engines_own_checks():
    """JobSet's webhook (pkg/webhooks/jobset_webhook.go) refuses a JobSet whose longest pod name
    `<jobset>-<replicated job>-<job index>-<pod index>-abcde` is no DNS-1035 label; the MPI
    operator's validation, an MPIJob whose `<name>-worker-<last>` is none."""
    name = workload_object_name(10**9, "x" * 100, max_length=MAX_GROUP_OBJECT_NAME)
    assert len(name) == MAX_GROUP_OBJECT_NAME == 48
    longest = dataclasses.replace(DDP, name=name, nodes=10_000)
    jobset = make_jobset(longest)
    rjob = jobset["spec"]["replicatedJobs"][0]
    pod_name = (f"{name}-{rjob['name']}-{rjob['replicas'] - 1}-"
                f"{rjob['template']['spec']['completions'] - 1}-abcde")
    assert len(pod_name) == 63 and dns1035(pod_name)
    assert len(master_addr(longest).split(".")[0]) <= 63
    # one node more, or a name of the common length, would be refused by the webhook: refused
    # here, before anything is sent
    with pytest.raises(ValueError, match="too long for 10001 nodes"):
        dataclasses.replace(longest, nodes=10_001)
    common = workload_object_name(10**9, "x" * 100)
    assert len(common) == MAX_OBJECT_NAME
    with pytest.raises(ValueError, match="over 63 characters"):
        dataclasses.replace(DDP, name=common)
    # an MPIJob takes the common length, with up to 1000 workers
    mpijob = make_mpijob(dataclasses.replace(MPIJOB, name=common, nodes=1000))
    assert dns1035(f"{common}-worker-{mpijob['spec']['mpiReplicaSpecs']['Worker']['replicas'] - 1}")
    with pytest.raises(ValueError, match="too long for 1001 nodes"):
        dataclasses.replace(MPIJOB, name=common, nodes=1001)


def dns1035(text: str) -> bool:
    import re
    return len(text) <= 63 and re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", text) is not None


@pytest.mark.parametrize("name", ["MASTER_ADDR", "NODE_RANK", "WORLD_SIZE"])
def test_the_variables_torchrun_reads_are_the_portals(name):
    with pytest.raises(ValueError, match=f"{name} is set by the portal"):
        dataclasses.replace(DDP, env=((name, "x"),))
    with pytest.raises(ValueError, match=f"{name} is set by the portal"):
        dataclasses.replace(DDP, secret_env=((name, "x"),))
    dataclasses.replace(MPIJOB, env=((name, "x"),))  # mpirun reads none of them


def test_deterministic_and_unshared():
    expected = copy.deepcopy(workload_objects(MPIJOB))
    first = workload_objects(MPIJOB)
    first[1]["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["metadata"]["labels"]["x"] = "y"
    first[1]["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0][
        "args"].append("x")
    first[0]["spec"]["podSelector"]["matchLabels"]["x"] = "y"
    assert workload_objects(MPIJOB) == expected
    assert workload_objects(dataclasses.replace(DDP)) == workload_objects(DDP)


# --- schemas and Pod Security ------------------------------------------------------------------

@functools.cache
def module_dir(module: str) -> Path:
    """A Go module's folder in the module cache (stack/k8s/build.py module_dir), downloaded
    if missing: the CRDs are read where they are, not copied into the repository."""
    go = shutil.which("go")
    assert go, "the Go toolchain reads the engines' CRDs from the module cache"
    result = subprocess.run([go, "mod", "download", "-json", module], capture_output=True,
                            text=True, cwd="/", env={**os.environ, "GOTOOLCHAIN": "local",
                                                     "GOFLAGS": "-mod=mod"})
    assert result.returncode == 0, result.stdout + result.stderr
    return Path(json.loads(result.stdout)["Dir"])


def strict(schema: Any) -> Any:
    """The schema with no field beyond those it names (as the API server prunes them, here
    refused, so that a misspelt field fails), except where it keeps unknown fields."""
    if isinstance(schema, list):
        return [strict(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: strict(value) for key, value in schema.items()}
    if "properties" in out and not out.get("x-kubernetes-preserve-unknown-fields"):
        out.setdefault("additionalProperties", False)
    return out


CRDS = {
    "JobSet": ("sigs.k8s.io/jobset@v0.12.0",
               "config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml", "v1alpha2"),
    "MPIJob": ("github.com/kubeflow/mpi-operator@v0.8.2",
               "manifests/base/kubeflow.org_mpijobs.yaml", "v2beta1"),
}


@functools.cache
def crd_validator(kind: str) -> jsonschema.Draft7Validator:
    module, path, version = CRDS[kind]
    crd = yaml.safe_load((module_dir(module) / path).read_text())
    assert crd["spec"]["names"]["kind"] == kind
    served = next(v for v in crd["spec"]["versions"] if v["name"] == version)
    return jsonschema.Draft7Validator(strict(served["schema"]["openAPIV3Schema"]))


def crd_errors(obj: dict[str, Any]) -> list[str]:
    body = {key: value for key, value in obj.items() if key != "metadata"}  # ObjectMeta's own
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
            for e in crd_validator(obj["kind"]).iter_errors(body)]


SPECS = {"ddp": DDP, "ddp-queued": dataclasses.replace(DDP, queue_labels=QUEUE),
         "mpi": MPIJOB, "mpi-queued": dataclasses.replace(MPIJOB, queue_labels=QUEUE),
         "ddp-cpu-one-node": dataclasses.replace(DDP, gpu_count=0, nodes=1,
                                                 max_runtime_seconds=None, home_claim=None)}


@pytest.mark.parametrize("spec", SPECS.values(), ids=SPECS)
def test_every_object_is_valid_against_its_schema(spec):
    version = kubernetes_validate.utils.latest_version()
    for obj in workload_objects(spec):
        if obj["kind"] in CRDS:
            assert crd_errors(obj) == []
        else:
            kubernetes_validate.validate(obj, version, strict=True)
    for pod in pod_templates(spec):
        kubernetes_validate.validate({"apiVersion": "v1", "kind": "Pod",
                                      "metadata": {"name": "p", **pod["metadata"]},
                                      "spec": {"restartPolicy": "Never", **pod["spec"]}},
                                     version, strict=True)
    if spec.engine == JOBSET:
        job = make_jobset(spec)["spec"]["replicatedJobs"][0]["template"]
        kubernetes_validate.validate({"apiVersion": "batch/v1", "kind": "Job",
                                      "metadata": {"name": "j"}, **job}, version, strict=True)


def test_the_crd_check_would_catch_a_misspelt_or_mistyped_field():
    jobset = make_jobset(DDP)
    jobset["spec"]["failurePolicy"]["maxRestart"] = 2
    assert any("maxRestart" in e for e in crd_errors(jobset))
    mpijob = make_mpijob(MPIJOB)
    mpijob["spec"]["mpiImplementation"] = "OpenMpi"
    mpijob["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] = "2"
    errors = crd_errors(mpijob)
    assert any("mpiImplementation" in e for e in errors)
    assert any("Worker/replicas" in e for e in errors)


def pod_templates(spec: WorkloadSpec) -> list[dict[str, Any]]:
    """Every pod template of the group's objects."""
    pods = []
    for obj in workload_objects(spec):
        if obj["kind"] == "JobSet":
            pods += [r["template"]["spec"]["template"] for r in obj["spec"]["replicatedJobs"]]
        elif obj["kind"] == "MPIJob":
            pods += [r["template"] for r in obj["spec"]["mpiReplicaSpecs"].values()]
    assert pods
    return pods


# the volume types "restricted" allows (https://kubernetes.io/docs/concepts/security/pod-security-standards/)
RESTRICTED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral",
                      "persistentVolumeClaim", "projected", "secret"}


def restricted_problems(pod: dict[str, Any]) -> list[str]:
    """What Pod Security "restricted" refuses in the pod, checked as its admission does."""
    spec = pod["spec"]
    context = spec.get("securityContext", {})
    problems = []
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(key):
            problems.append(key)
    for volume in spec.get("volumes", []):
        if not set(volume) - {"name"} <= RESTRICTED_VOLUMES:
            problems.append(f"volume {volume['name']}")
    for container in spec["containers"] + spec.get("initContainers", []):
        own = container.get("securityContext", {})
        if own.get("allowPrivilegeEscalation") is not False:
            problems.append("allowPrivilegeEscalation")
        if "ALL" not in own.get("capabilities", {}).get("drop", []):
            problems.append("capabilities not dropped")
        if set(own.get("capabilities", {}).get("add", [])) - {"NET_BIND_SERVICE"}:
            problems.append("capabilities added")
        if not own.get("runAsNonRoot", context.get("runAsNonRoot")):
            problems.append("runAsNonRoot")
        if own.get("runAsUser", context.get("runAsUser")) == 0:
            problems.append("runAsUser 0")
        seccomp = own.get("seccompProfile", context.get("seccompProfile", {}))
        if seccomp.get("type") not in ("RuntimeDefault", "Localhost"):
            problems.append("seccomp")
        if own.get("privileged") or any(p.get("hostPort") for p in container.get("ports", [])):
            problems.append("privileged or host port")
    return problems


@pytest.mark.parametrize("spec", SPECS.values(), ids=SPECS)
def test_every_pod_passes_pod_security_restricted(spec):
    for pod in pod_templates(spec):
        assert restricted_problems(pod) == []
        # with what the MPI operator adds (its SSH keys' Secret, its hostfile's ConfigMap)
        added = copy.deepcopy(pod)
        added["spec"]["volumes"] += [{"name": "ssh-auth", "secret": {"secretName": "s"}},
                                     {"name": "mpi-job-config", "configMap": {"name": "c"}}]
        assert restricted_problems(added) == []


def test_the_restricted_check_can_fail():
    pod = copy.deepcopy(pod_templates(MPIJOB)[0])
    del pod["spec"]["securityContext"]["runAsNonRoot"]
    pod["spec"]["volumes"].append({"name": "h", "hostPath": {"path": "/"}})
    pod["spec"]["containers"][0]["securityContext"]["capabilities"]["add"] = ["SYS_ADMIN"]
    assert restricted_problems(pod) == ["volume h", "capabilities added", "runAsNonRoot"]
    root = dataclasses.replace(DDP, run_as_non_root=False, run_as_user=0)
    assert "runAsUser 0" in restricted_problems(pod_templates(root)[0])
