"""A workload's launch spec: what it was admitted to run, frozen at admission.

`workload_launch` resolves it from the launch request, its template and its GPU type, in the
admission transaction, into `Workload.launch_spec` (JSON). The create task builds the
workload's objects from it alone (objects.workload_spec), so a launch that waits — requeued
after an outage, or a retry an hour later — creates what was admitted even if an admin edited
the template (image, command, args, env, token variable, run-as-root) or the GPU type (resource
name, node selector) in between.

Secrets are not in it: the access token stays in its column and the workload's Secret, the
proxy's credentials are derived when the objects are made (workloads/access.py). The user's
and project's secrets a launch names are, by name only (credentials.SecretUse: which
Kubernetes Secret, its key names, where its files go); their values stay in those Secrets.

Migration 0009 has its own copy of `launch_spec_resolve` (a migration must not change when this
module does); a new key here is a new VERSION, and the migration's copy stays as it is.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

from catalogue.models import GpuType, Template
from catalogue.options import launch_argv
from catalogue.sharing import DRA, dra_type_class
from credentials.manifests import SecretUse
from kube.labels import workload_host

from .models import Workload

VERSION = 9  # 2: how a service is reached (exposure, host); 3: nodes and engine; 4: ssh;
# 5: avoid_nodes; 6: secrets; 7: mounts; 8: datasets among the mounts (an entry without
# `dataset` is a volume's, as every entry of a version 7 spec is); 9: checkpoint


def launch_spec_resolve(*, template: Template, gpu_type: GpuType, kind: str, image: str, command: list[str],
                        args: list[str], env: dict[str, str], port: int | None, gpu_count: int,
                        cpu: int, memory_gb: int, max_runtime_minutes: int | None,
                        retries: int, use_home: bool, exposure: str = "loadbalancer",
                        host: str = "", nodes: int = 1, ssh: bool = False,
                        avoid_nodes: list[str] | tuple[str, ...] = (),
                        secrets: list[SecretUse] | tuple[SecretUse, ...] = (),
                        mounts: list[dict[str, Any]] | tuple[dict[str, Any], ...] = (),
                        checkpoint: dict[str, Any] | None = None,
                        ) -> dict[str, Any]:
    """The spec as JSON from the launch's own values and its template and GPU type rows now.
    The env is a list of [name, value] pairs: the template's, then the launch's (overriding a
    template's variable in place), in that order (a JSON object would not keep it in
    PostgreSQL)."""
    merged = {**(template.env or {}), **(env or {})}
    return {
        "version": VERSION,
        "template": template.slug,
        "kind": kind,
        "image": image,
        "command": list(command or template.command or []),
        # a custom template's are the launch's; any other's, its own and then the options a
        # launch may add (catalogue/options.py): a launch never replaces a template's program
        "args": launch_argv(template=template, args=args),
        "env": [[name, value] for name, value in merged.items()],
        # the name of the variable that carries the access token (its value is not here)
        "token_env": template.token_env or "",
        "run_as_non_root": not template.allow_root,
        "run_as_user": template.run_as_user,
        "port": port,
        "gpu_type": gpu_type.slug,
        "gpu_resource": gpu_type.resource_name,
        "gpu_count": gpu_count,  # per node
        # a DRA type's claim (catalogue/sharing.py): the type's own device class, whose
        # selector holds the driver's terms and the type's product and memory; absent for every
        # other type
        **({"gpu_claim": {"device_class": dra_type_class(gpu_type.slug), "selector": ""}}
           if gpu_type.sharing == DRA else {}),
        # how many nodes, and how they run together: "" one pod, "jobset" torchrun on each
        # node, "mpi" mpirun from a launcher (catalogue Template.engine)
        "nodes": nodes,
        "engine": template.engine,
        "node_selector": dict(gpu_type.node_selector or {}),
        # the nodes it must not run on: those of a maintenance window its maximum runtime
        # would cross (calendars/admission.py), as admission saw them
        "avoid_nodes": sorted(set(avoid_nodes)),
        "cpu": cpu,
        "memory_gb": memory_gb,
        "max_runtime_minutes": max_runtime_minutes,
        "backoff_limit": retries,
        "use_home": use_home,
        # the volumes it mounts, as admission resolved them (workloads/mounts.py): each one's
        # volume id and name, claim, path and whether read-only (the home volume is use_home's);
        # a dataset's: its id and name, claim, path, read-only, and where its data is (its
        # kind, size and volume_source: its volume in the project is made from these) and an
        # S3 dataset's variables (`env`); absent without any, as in the specs frozen before
        # volumes
        **({"mounts": [dict(mount) for mount in mounts]} if mounts else {}),
        # a batch job's checkpoint directory (mounts.py): its volume's id, name and claim, and
        # the folder of it (a requeued copy runs from this spec, so it gets the same folder);
        # absent without one, as in the specs frozen before checkpoints
        **({"checkpoint": dict(checkpoint)} if checkpoint else {}),
        # a service, or a batch job with SSH: "loadbalancer" (an address of its own) or
        # "shared" (the gateway, `host`)
        "exposure": exposure if kind == "service" or ssh else "",
        "host": host if (kind == "service" or ssh) and exposure == "shared" else "",
        # the portal's SSH server beside the program, and the program it wraps when
        # there is no command: the image's entrypoint as the template names it
        "ssh": ssh,
        "entrypoint": list(template.entrypoint or []) if ssh else [],
        # the user's and project's secrets it reads, by reference (names, never values)
        "secrets": [use.frozen() for use in secrets],
    }


def launch_spec_from_rows(workload: Workload, *, avoid_nodes: list[str] | tuple[str, ...] = (),
                          secrets: list[SecretUse] | tuple[SecretUse, ...] = (),
                          mounts: list[dict[str, Any]] | tuple[dict[str, Any], ...] = (),
                          checkpoint: dict[str, Any] | None = None,
                          ) -> dict[str, Any]:
    """The spec resolved from the workload's row and its template and GPU type as they are
    now, and the site's way of reaching services (PORTAL_SERVICE_EXPOSURE): what admission
    freezes, with the nodes its admission checks told it to avoid and the secrets its launch
    named, the volumes it mounts and its checkpoint directory."""
    exposure = settings.PORTAL_SERVICE_EXPOSURE
    host = workload_host(workload.pk, settings.PORTAL_SERVICE_DOMAIN) \
        if exposure == "shared" and workload.pk is not None else ""
    return launch_spec_resolve(
        template=workload.template, gpu_type=workload.gpu_type, kind=workload.kind,
        image=workload.image, command=workload.command, args=workload.args, env=workload.env,
        port=workload.port, gpu_count=workload.gpu_count, cpu=workload.cpu,
        memory_gb=workload.memory_gb, max_runtime_minutes=workload.max_runtime_minutes,
        retries=workload.retries, use_home=workload.use_home, exposure=exposure, host=host,
        nodes=workload.nodes, ssh=workload.ssh, avoid_nodes=avoid_nodes, secrets=secrets,
        mounts=mounts, checkpoint=checkpoint)


def launch_spec_of(workload: Workload) -> dict[str, Any]:
    """The frozen spec; a row without one (admitted by an older portal during an upgrade, or
    made by hand in a test or benchmark) is resolved from its rows now."""
    return workload.launch_spec or launch_spec_from_rows(workload)


def launch_secrets(workload: Workload) -> list[SecretUse]:
    """The secrets a workload was launched with (the page's and the API's list)."""
    return [SecretUse.thawed(value) for value in (workload.launch_spec or {}).get("secrets") or ()]


def launch_checkpoint(workload: Workload) -> dict[str, Any] | None:
    """The checkpoint directory a workload was launched with (its volume's id, name, claim and
    folder), or None (the page's and the API's)."""
    checkpoint = (workload.launch_spec or {}).get("checkpoint")
    return dict(checkpoint) if checkpoint else None
