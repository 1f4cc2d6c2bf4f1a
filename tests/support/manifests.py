"""Workload specs as the seeded templates launch them, and the proxy beside a service: the
input of the manifest tests and of the real cluster's checks of the same objects."""

from __future__ import annotations

from access.proxy import (
    CLIENT_SECRET_KEY,
    COOKIE_SECRET_KEY,
    ProxySpec,
)
from workloads.manifests import (
    BATCH,
    HOME_MOUNT_PATH,
    JOBSET,
    MPI,
    WorkloadSpec,
)


def proxy_for(name: str, port: int, token_env: str | None = None, **changes) -> ProxySpec:
    """The proxy as workloads.access.workload_proxy builds it (settings of the tests)."""
    return ProxySpec(image="quay.io/oauth2-proxy/oauth2-proxy:v7.15.4",
                     issuer_url="https://portal.example.org/o",
                     backend_url="http://gpu-portal-web.gpu-portal.svc:8000/o",
                     client_id=f"workload-{name}-0123456789abcdef", secret_name=name,
                     upstream_port=port, upstream_token_env=token_env, **changes)


PROXY_SECRETS = ((CLIENT_SECRET_KEY, "client-secret-0123456789abcdef"),
                 (COOKIE_SECRET_KEY, "Y29va2llLXNlY3JldC0wMTIzNDU2Nzg5YWJjZGVmMDE="))
JUPYTER_PROXY = proxy_for("wl-42-my-notebook", 8888, "JUPYTER_TOKEN")
JUPYTER = WorkloadSpec(
    workload_id=42,
    name="wl-42-my-notebook",
    namespace="gpu-vision-lab-abc123",
    project_id="d964ebf8619749c3",
    owner="researcher",
    owner_id="5e1f0c6b2a",
    template="jupyter",
    kind="service",
    image="quay.io/jupyter/pytorch-notebook:cuda12-2024-06-17",
    args=("start-notebook.py", f"--ServerApp.root_dir={HOME_MOUNT_PATH}"),
    env=(("JUPYTER_ENABLE_LAB", "yes"),),
    secret_env=(("JUPYTER_TOKEN", "0123456789abcdef0123456789abcdef"),),
    port=8888,
    node_selector=(("gputype", "a100"),),
    run_as_user=1000,
    home_claim="gpu-portal-home",
    lb_address_pool="tenants",
    proxy=JUPYTER_PROXY,
    secret_data=PROXY_SECRETS,
)


def service(template: str, workload_id: int, image: str, port: int, **fields) -> WorkloadSpec:
    """A service of one of the other templates, as the seeded template launches it."""
    name = f"wl-{workload_id}-{template}"
    return WorkloadSpec(workload_id=workload_id, name=name, namespace="gpu-vision-lab-abc123",
                        project_id="d964ebf8619749c3", owner="researcher", owner_id="5e1f0c6b2a",
                        template=template, kind="service", image=image, port=port,
                        node_selector=(("gputype", "v100"),), lb_address_pool="tenants",
                        proxy=proxy_for(name, port), secret_data=PROXY_SECRETS, **fields)


# the four service templates (workloads/migrations/0003_seed_templates.py)
DIGITS = service("digits", 43, "nvcr.io/nvidia/digits:21.02-tensorflow-py3", 5000,
                 run_as_non_root=False)  # DIGITS runs as root: the proxy must not
TENSORBOARD = service("tensorboard", 44, "tensorflow/tensorflow:2.16.1-gpu", 6006,
                      command=("tensorboard",),
                      args=("--logdir", "/home/portal/logs", "--bind_all", "--port", "6006"),
                      run_as_user=1000, home_claim="gpu-portal-home")
CUSTOM_SERVICE = service("custom", 45, "nginx:1.27", 8080, run_as_non_root=False)
SERVICES = {"jupyter": JUPYTER, "digits": DIGITS, "tensorboard": TENSORBOARD,
            "custom": CUSTOM_SERVICE}


COMMON = dict(namespace="gpu-vision-lab-abc123", project_id="d964ebf8619749c3",
              owner="researcher", owner_id="5e1f0c6b2a", kind=BATCH, nodes=2, gpu_count=4,
              node_selector=(("gputype", "a100"),), cpu="8", memory="64Gi",
              max_runtime_seconds=7200, run_as_user=1000, home_claim="gpu-portal-home",
              backoff_limit=2, ttl_seconds_after_finished=600)


# 2 nodes × 4 GPUs, as the seeded templates launch them (catalogue migration 0003)
DDP = WorkloadSpec(workload_id=51, name="wl-51-resnet", template="pytorch-ddp", engine=JOBSET,
                   image="nvcr.io/nvidia/pytorch:24.10-py3",
                   command=("python", "/home/portal/train.py"), args=("--epochs", "3"),
                   env=(("NCCL_DEBUG", "INFO"),), **COMMON)
MPIJOB = WorkloadSpec(workload_id=52, name="wl-52-allreduce", template="mpi", engine=MPI,
                      image="docker.io/mpioperator/openmpi:v0.8.2",
                      command=("/home/portal/allreduce",), args=("--iterations", "10"),
                      env=(("OMP_NUM_THREADS", "1"),), **COMMON)


CUSTOM_BATCH = WorkloadSpec(
    workload_id=7,
    name="wl-7-train",
    namespace="gpu-vision-lab-abc123",
    project_id="d964ebf8619749c3",
    owner="researcher",
    owner_id="5e1f0c6b2a",
    template="custom",
    kind="batch",
    image="nvcr.io/nvidia/pytorch:24.01-py3",
    command=("python", "-c", "print('héllo \"world\"; $(id)')"),
    args=("--epochs", "3"),
    gpu_resource="nvidia.com/mig-1g.10gb",
    gpu_count=2,
    node_selector=(("gputype", "v100"), ("zone", "b")),
    cpu="8",
    memory="32Gi",
    max_runtime_seconds=3600,
    run_as_non_root=False,
    pod_annotations=(("kubesim.io/run-seconds", "1"),),
    backoff_limit=1,
    ttl_seconds_after_finished=600,
)
