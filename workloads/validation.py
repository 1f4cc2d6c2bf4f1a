"""The one validation of a launch request: what the domain allows, on typed values.

`launch_clean` checks a request whose fields already have their types (the API's
LaunchSerializer reads JSON into them, the launch page's LaunchForm reads the form's fields),
fills in what the template decides (kind, image, port, CPU, memory, the runtime limit), and
raises LaunchInvalid with the errors per field. It needs no web framework: the rules and the
fields' bounds are the domain's, the serializer and the form wrap them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from django.conf import settings

from access.proxy import PROXY_DIR
from access.services import tenant_service_access
from access.ssh_server import BIN_DIR, CONFIG_DIR
from catalogue.environment import (
    env_problems,
    env_size,
    env_template_problems,
    gpu_stack_refusal,
)
from catalogue.images import image_refusal, validate_image_reference
from catalogue.models import GpuType, Template
from catalogue.options import launch_args_problems
from catalogue.sharing import DRA
from cluster.capacity import GpuTypeCapacity, gpu_capacity
from clusters.models import Cluster
from clusters.selectors import (
    cluster_capacity,
    cluster_home,
    cluster_named,
    cluster_offers,
    cluster_place,
)
from core.validation import FieldsInvalid, excerpt
from credentials.validation import SecretInvalid, secret_uses_clean
from identity.identity import Identity
from kube.client import KubeError
from kube.dra import dra_refusal
from kube.engines import engine_refusal
from kube.kueue import queueing_on
from tenants.models import Quota, Tenant
from tenants.selectors import tenant_admits_root, tenant_pod_security

from .advice import launch_pull_check, never_fits
from .manifests import (
    CHECKPOINT_ENV,
    CHECKPOINT_MOUNT_PATH,
    HOME_MOUNT_PATH,
    JOBSET,
    MPI_SSH_PATH,
    TORCHRUN_ENV,
)
from .mounts import MountsInvalid, checkpoint_resolve, mounts_env, mounts_resolve
from .naming import display_name_clean

if TYPE_CHECKING:
    from identity.identity import Identity

# the bounds of the typed fields, declared by the API's serializer and the page's form alike
NAME_MAX_LENGTH = 200
IMAGE_MAX_LENGTH = 512
NUMBER_BOUNDS = {  # field → (least, most)
    "gpu_count": (1, 64),  # per node
    "nodes": (1, 64),
    "port": (1, 65535),
    "cpu": (1, 256),
    "memory": (1, 4096),  # GiB
    "max_runtime_minutes": (1, 60 * 24 * 365),
    "retries": (0, 10),
}
# the command, arguments and environment together, as the kernel counts them (each string and
# its NUL): execve takes at most 2 MiB and etcd an object of 1.5 MiB, so a launch past this
# would be admitted and then fail in the cluster
MAX_LAUNCH_BYTES = 256 * 1024


class DistributedUnavailable(Exception):
    """A distributed launch on a cluster that cannot run it (no JobSet or MPI operator, or no
    Kueue to admit a group whole): the message says what is missing (kube/engines.py)."""

    code = "distributed_unavailable"


class DraUnavailable(Exception):
    """A launch of a GPU type claimed through DRA on a cluster that does not serve
    resource.k8s.io/v1 (kube/dra.py): the message says so."""

    code = "dra_unavailable"


class ClusterUnavailable(Exception):
    """A launch on a cluster that is disabled or does not answer (as its probe last saw it):
    the message says which and why; it may be launched elsewhere."""

    code = "cluster_unavailable"


class ImagePullRefused(Exception):
    """The image's registry refused the launch's registry login, or has no such image: a pod
    would wait in ImagePullBackOff. `code`: registry_login_failed, image_not_readable or
    image_not_found (credentials/pulls.py); the message names no password."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class LaunchInvalid(FieldsInvalid):
    """A launch refused before admission: `errors` maps each field to what is wrong."""


def name_clean(name: str) -> str:
    """A workload's display name as stored; ValueError says why it is refused."""
    return display_name_clean(name)


def template_check(template: Template) -> Template:
    if not template.enabled:
        raise ValueError(f"The {template.name} template is disabled.")
    return template


def gpu_type_check(gpu_type: GpuType) -> GpuType:
    if not gpu_type.enabled:
        raise ValueError(f"The {gpu_type.slug} GPU type is disabled.")
    return gpu_type


def env_check(env: dict[str, str]) -> dict[str, str]:
    problems = env_problems(env)  # catalogue/environment.py: the one rule
    if problems:
        raise LaunchInvalid({"env": problems})
    return env


# the rules on one field each, whatever the others hold (the serializer runs them per field):
# each takes its field's typed value
FIELD_RULES: dict[str, Callable[[Any], Any]] = {"name": name_clean, "template": template_check, "gpu_type": gpu_type_check,
               "env": env_check}


def field_clean(field: str, value: Any) -> Any:
    """`value` through FIELD_RULES[field]; LaunchInvalid naming `field` when it is refused
    (the one mapping of a rule's refusal, for this module, the serializer and the form)."""
    try:
        return FIELD_RULES[field](value)
    except LaunchInvalid:
        raise
    except ValueError as exc:
        raise LaunchInvalid({field: [str(exc)]}) from exc


def _field_errors(request: dict[str, Any]) -> dict[str, list[str]]:
    errors: dict[str, list[str]] = {}
    for field in FIELD_RULES:
        if field not in request:
            continue
        try:
            request[field] = field_clean(field, request[field])
        except LaunchInvalid as exc:
            errors.update(exc.errors)
    return errors


def launch_clean(*, request: dict[str, Any], tenant: Tenant | None = None,
                 quota: Quota | None = None, check_capacity: bool = True,
                 identity: Identity | None = None) -> dict[str, Any]:
    """The request, completed from its template, or LaunchInvalid. `tenant` and `quota` are
    the launching project's (None: rules that need them are not checked); `identity`, the
    caller's: the volumes `mounts` names (mounts.py; without one, a launch mounts none) and
    the secrets it names (secrets: [{secret, path?}], as credentials.SecretUses once clean)
    must be theirs to use; `check_capacity`: refuse a distributed launch the cluster cannot
    run and a request larger than any node of its GPU type (asks the cluster), and an image
    its registry secret cannot pull (asks the registry: ImagePullRefused). The check before a
    launch leaves these to the launch advice (advice.py), which tells them as notes with the
    same words."""
    data = dict(request)
    errors = _field_errors(data)
    if errors:
        raise LaunchInvalid(errors)
    # first: a cluster that cannot take it now is the answer, whatever else the launch asks
    unavailable = _cluster(data, errors, tenant)
    if unavailable:
        raise ClusterUnavailable(unavailable)
    template: Template = data["template"]
    if template.distributed and check_capacity:
        refusal = engine_refusal(template.engine)
        if refusal:
            raise DistributedUnavailable(refusal)
    gpu_type = data.get("gpu_type")
    if isinstance(gpu_type, GpuType) and gpu_type.sharing == DRA and check_capacity:
        refusal = dra_refusal()
        if refusal:
            raise DraUnavailable(refusal)
    kind = data.get("kind") or template.kind
    if not template.custom and kind != template.kind:
        errors["kind"] = [f"The {template.name} template runs as a {template.kind}."]
    data["kind"] = kind
    # the image: one rule for every template. A template runs its own image unless it
    # takes the researcher's (custom: always; others: where an admin allowed it), and
    # whatever runs must be inside the site's registries and the tenant's prefixes
    given = (data.get("image") or "").strip()
    image = given or template.image
    if template.custom and not given:
        errors["image"] = ["The custom template needs an image."]
    if not template.takes_program and data.get("command"):
        errors["command"] = ["Only the custom and the distributed templates take a command."]
    # other templates run their own program: a launch appends only the options they declare
    args_refused = launch_args_problems(data.get("args") or [], template=template)
    if args_refused:
        errors["args"] = args_refused
    if image and "image" not in errors:
        try:
            image = validate_image_reference(image)
        except ValueError as exc:
            errors["image"] = [str(exc)]
        else:
            refusal = _image_refusal(template, image, tenant, replaced=bool(given))
            if refusal:
                errors["image"] = [refusal]
    data["image"] = image
    _nodes(data, errors, template)
    _ssh(data, errors, template, tenant)
    # fields that belong to one kind only
    port = data.get("port")
    if kind == Template.Kind.BATCH:
        if port is not None and template.custom:
            errors["port"] = ["A batch job has no port; choose the service kind."]
        data["port"] = None
    else:
        if "retries" in data and data["retries"]:
            errors["retries"] = ["Retries apply to batch jobs only."]
        if template.custom and port is None:
            errors["port"] = ["A service needs the port it listens on."]
        data["port"] = port if template.custom else template.port
    if data.get("public"):
        if kind != Template.Kind.SERVICE:
            errors["public"] = ["Only a service can be public; a batch job has no address."]
        elif tenant is not None and not tenant_service_access(tenant).allow_public:
            errors["public"] = [f"{tenant.name} may not open workloads to everyone; an "
                                "admin can allow it."]
    # a template saved before the GPU stack's variables were refused must not pass them on
    inherited = [refusal for key in template.env if (refusal := gpu_stack_refusal(key))]
    if inherited:
        errors["template"] = [f"The {template.name} template sets a variable the portal no "
                              f"longer passes; an admin must remove it. {inherited[0]}"]
    if template.allow_root and tenant is not None and not tenant_admits_root(tenant):
        errors.setdefault("template", []).append(
            f"The {template.name} template may run as root, which {tenant.name}'s "
            f"namespace does not admit (Pod Security “{tenant_pod_security(tenant)}”); "
            "an admin can allow root for the project.")
    env_refused = env_template_problems(data.get("env", {}), token_env=template.token_env,
                                        fixed_command=not template.takes_program)
    if env_refused:
        errors["env"] = env_refused
    _mounts(data, errors, template, tenant, identity)
    _checkpoint(data, errors, tenant, identity)
    _secrets(data, errors, template, tenant, identity)
    _launch_size(data, errors)
    data.setdefault("cpu", template.default_cpu)
    data.setdefault("memory", template.default_memory_gb)
    _runtime(data, errors, tenant, quota)
    if check_capacity and "gpu_type" in data:
        _never_fits(data, errors)
    if errors:
        raise LaunchInvalid(errors)
    if check_capacity and tenant is not None:
        pull = launch_pull_check(data, tenant)  # last: it asks the registry, after all else
        if pull is not None and pull.refused:
            raise ImagePullRefused(pull.code, pull.message)
    return data


def _cluster(data: dict[str, Any], errors: dict[str, list[str]], tenant: Tenant | None
             ) -> str:
    """The cluster it runs on (`cluster`: a name), replaced by its name once checked: one the
    project may use (a project limited to some clusters), that offers the GPU type. Returns
    why the cluster cannot take it now (disabled, or another than the home cluster
    unreachable), else "".

    A service that names none is placed by the portal (clusters.selectors.cluster_place: the
    home cluster when it has room, else another that answers with free GPUs of the type) and
    runs there. Batch work (Jobs, JobSets, MPIJobs) runs on another cluster through
    MultiKueue: its objects are made in the home cluster, which dispatches them to that
    worker; one that names no cluster goes where there is room for it (the home cluster
    first, then the worker with the most of its GPU type free: `_placed`)."""
    name = data.get("cluster") or ""
    allowed = list(tenant.clusters.values_list("name", flat=True)) if tenant is not None else []
    gpu_type = data.get("gpu_type")
    placed = _placed_by_portal(data)
    cluster = cluster_named(name) if name else None
    if not name and placed and isinstance(gpu_type, GpuType) and not _home_data(data):
        cluster = cluster_place(allowed=allowed, slug=gpu_type.slug,
                                gpus=int(data.get("gpu_count") or 0) * int(data.get("nodes") or 1))
    if not name and cluster is None:
        cluster = _placed(data, tenant)
    if cluster is None:
        errors["cluster"] = [f"No cluster named {excerpt(name)}."]
        return ""
    data["cluster"] = cluster.name
    if allowed and cluster.name not in allowed:
        assert tenant is not None
        errors["cluster"] = [f"{tenant.name} may use the clusters {', '.join(sorted(allowed))} "
                             f"only."]
        return ""
    if not cluster.enabled:
        return f"The cluster {cluster.name} is disabled by an admin; launch on another."
    # the home cluster's outage is absorbed as it always was: the launch is accepted and its
    # objects are made once the cluster answers again (an accepted launch is never lost)
    if cluster.state != Cluster.State.READY and not cluster.home:
        reason = cluster.reason or "no reason given"
        return f"The cluster {cluster.name} does not answer ({reason}); launch on another."
    if cluster.gpu_types or not cluster.home:
        if isinstance(gpu_type, GpuType) and not cluster_offers(
                cluster, gpu_type.slug, cluster_capacity(cluster)):
            errors["cluster"] = [f"The cluster {cluster.name} offers no {gpu_type.slug}."]
            return ""
    if not cluster.home and placed and (home := _home_data(data)):
        errors["cluster"] = [f"{home} on the home cluster ({cluster_home().name}) only: "
                             f"launch it there, or on {cluster.name} without them."]
    elif not cluster.home and not placed and (refusal := dispatch_refusal(data, cluster.name)):
        errors["cluster"] = [refusal]
    return ""


def _placed_by_portal(data: dict[str, Any]) -> bool:
    """Whether the launch is one the portal places on a cluster itself: a service (one pod
    behind its address), not batch or distributed work."""
    template = data.get("template")
    if not isinstance(template, Template) or template.distributed:
        return False
    return (data.get("kind") or template.kind) == Template.Kind.SERVICE


def _home_data(data: dict[str, Any]) -> str:
    """What of the launch lives on the home cluster (its volumes, datasets, the home folder,
    a checkpoint directory: their claims and data are there; the secrets it uses, whose
    Kubernetes Secrets are written there), in words; "" when nothing."""
    if data.get("mounts") or data.get("checkpoint"):
        return "Volumes and datasets are"
    if data.get("secrets"):
        return "The project's secrets are"
    if data.get("use_home"):
        return "The home folder is"
    return ""


def _kind_of(data: dict[str, Any]) -> str:
    template = data.get("template")
    return str(data.get("kind") or (template.kind if isinstance(template, Template) else ""))


def _placed(data: dict[str, Any], tenant: Tenant | None) -> Cluster:
    """Where a launch that names no cluster goes. Batch work of a GPU type goes where there is
    room for it now (each cluster's read model): the home cluster when it has the GPUs free,
    else the worker that answers, offers the type and has them free (the most free first),
    through MultiKueue; where none has room, the home cluster if it offers the type (it waits
    in its queue there), else the worker that offers it with the most free. What cannot be
    dispatched (what it takes lives on the home cluster) stays home when the home cluster
    offers the type. Anything else, and everything while the home cluster's figures are not
    read (it does not answer), goes home, whose outage a launch waits out."""
    home = cluster_home()
    gpu_type = data.get("gpu_type")
    if _kind_of(data) != Template.Kind.BATCH or not isinstance(gpu_type, GpuType):
        return home
    capacity = cluster_capacity(home)
    if capacity is None:
        return home
    slug = gpu_type.slug
    gpus = int(data.get("gpu_count") or 0) * int(data.get("nodes") or 1)
    at_home = cluster_offers(home, slug, capacity)
    if at_home and (_free(capacity, slug) >= gpus or dispatch_refusal(data, home.name)):
        return home
    allowed = set(tenant.clusters.values_list("name", flat=True)) if tenant is not None else set()
    best: tuple[int, Cluster] | None = None
    for worker in Cluster.objects.filter(enabled=True, home=False,
                                         state=Cluster.State.READY).order_by("name"):
        if allowed and worker.name not in allowed:
            continue
        # its figures may not be read yet (its read model starts at the first ask): the types
        # its admin named still say what it offers
        figures = cluster_capacity(worker)
        if not cluster_offers(worker, slug, figures):
            continue
        free = _free(figures, slug)
        if best is None or free > best[0]:
            best = (free, worker)
    if best is not None and (not at_home or best[0] >= gpus):
        return best[1]
    return home


def _free(capacity: dict[str, GpuTypeCapacity] | None, slug: str) -> int:
    figures = (capacity or {}).get(slug)
    return figures.free if figures is not None else 0


def dispatch_refusal(data: dict[str, Any], cluster: str) -> str:
    """Why a launch cannot run on worker cluster `cluster` through MultiKueue, else "": it
    dispatches batch work only, and copies the Job (JobSet, MPIJob) alone, so nothing the
    home cluster holds beside it (volumes, secrets, the SSH server's keys) reaches the worker."""
    if _kind_of(data) != Template.Kind.BATCH:
        return (f"Only services of one pod are placed on {cluster}, and batch and distributed "
                f"jobs dispatched there; this runs on the home cluster ({cluster_home().name}).")
    if not queueing_on_home():
        return (f"Jobs reach {cluster} through the home cluster's Kueue (MultiKueue), which "
                "does not queue here.")
    taken = [what for field, what in (("use_home", "the home volume"), ("mounts", "volumes"),
                                      ("secrets", "secrets"), ("ssh", "SSH"),
                                      ("checkpoint", "a checkpoint"))
             if data.get(field)]
    if taken:
        return (f"A job dispatched to {cluster} runs with what its image holds: "
                f"{', '.join(taken)} stay on the home cluster.")
    return ""


def queueing_on_home() -> bool:
    try:
        return queueing_on()
    except KubeError:
        return False


def _mounts(data: dict[str, Any], errors: dict[str, list[str]], template: Template,
            tenant: Tenant | None, identity: Identity | None) -> None:
    """The volumes and datasets it mounts, resolved for the caller in the tenant (mounts.py);
    an S3 dataset's variables set by nothing else."""
    entries = data.get("mounts") or []
    if not entries:
        data["mounts"] = []
        return
    if tenant is None or identity is None:
        errors["mounts"] = ["Volumes are mounted in a project's launch only."]
        return
    try:
        data["mounts"] = mounts_resolve(entries, identity=identity, tenant=tenant,
                                        use_home=bool(data.get("use_home")))
    except MountsInvalid as exc:
        errors["mounts"] = exc.errors
        return
    taken = {*(template.env or {}), *(data.get("env") or {}), template.token_env}
    clash = sorted(taken & set(mounts_env(data["mounts"])))
    if clash:
        errors["mounts"] = [f"{', '.join(clash)}: set by the launch or its template, and by "
                            "the S3 dataset it mounts."]


def _checkpoint(data: dict[str, Any], errors: dict[str, list[str]], tenant: Tenant | None,
                identity: Identity | None) -> None:
    """A batch job's checkpoint directory, on a volume the caller may mount (mounts.py); its
    variable is the portal's to set."""
    entry = data.get("checkpoint")
    data["checkpoint"] = None
    if entry in (None, "", {}):
        return
    if tenant is None or identity is None:
        errors["checkpoint"] = ["A checkpoint directory is on a project's volume: a project's "
                                "launch only."]
        return
    try:
        data["checkpoint"] = checkpoint_resolve(entry, identity=identity, tenant=tenant,
                                                kind=data["kind"])
    except MountsInvalid as exc:
        errors["checkpoint"] = exc.errors
        return
    if CHECKPOINT_ENV in (data.get("env") or {}):
        errors.setdefault("env", []).append(
            f"{CHECKPOINT_ENV} is set by the portal (the checkpoint directory).")


def _nodes(data: dict[str, Any], errors: dict[str, list[str]], template: Template) -> None:
    """How many nodes: one, unless the template runs a group (a JobSet or an MPIJob), which
    runs the researcher's program on each."""
    nodes = data.get("nodes") or 1
    data["nodes"] = nodes
    if nodes > 1 and not template.distributed:
        errors["nodes"] = [f"The {template.name} template runs on one node; launch "
                           "pytorch-ddp or mpi to span several."]
    if template.distributed and not data.get("command"):
        errors["command"] = [f"Give the program {template.name} runs on every node, for "
                             "example python train.py."]


def ssh_refusal(*, template: Template, command: list[str] | None,
                tenant: Tenant | None = None) -> str | None:
    """Why a launch of `template` cannot have SSH, or None."""
    if not template.ssh:
        return f"The {template.name} template does not offer SSH."
    if tenant is not None and not tenant_service_access(tenant).ssh_enabled:
        return f"SSH is turned off for {tenant.name}; an admin can turn it on."
    if not (command or template.ssh_program):
        return ("SSH starts beside the program the container runs, and this image's is not "
                "known: give the command.")
    return None


def _ssh(data: dict[str, Any], errors: dict[str, list[str]], template: Template,
         tenant: Tenant | None) -> None:
    """Whether the SSH server runs beside the program: what the launch asked, else the
    template's default where the launch allows it (a default that cannot hold is off, not an
    error). A batch job gets SSH only when asked: it would hold an address of its own."""
    asked = data.get("ssh")
    refusal = ssh_refusal(template=template, command=data.get("command"), tenant=tenant)
    if asked and refusal:
        errors["ssh"] = [refusal]
    default = ssh_by_default(template, data["kind"])
    data["ssh"] = bool(default if asked is None else asked) and refusal is None


def ssh_by_default(template: Template, kind: str) -> bool:
    """A launch that says nothing of SSH has it where its template offers it, for a service
    only: a batch job with SSH would hold an address of its own."""
    return template.ssh and kind == Template.Kind.SERVICE


# where the portal mounts its own volumes into a workload's container: no secret goes there
RESERVED_PATHS = (HOME_MOUNT_PATH, "/dev/shm", PROXY_DIR, BIN_DIR, CONFIG_DIR, MPI_SSH_PATH,
                  CHECKPOINT_MOUNT_PATH)


def _secrets(data: dict[str, Any], errors: dict[str, list[str]], template: Template,
             tenant: Tenant | None, identity: Identity | None) -> None:
    """The secrets the launch names, as SecretUses (credentials/validation.py): each one the
    caller may use in this project, and none setting a variable the launch, its template, the
    portal or another secret sets, or one a fixed program must not be handed."""
    refs = data.get("secrets") or []
    data["secrets"] = []
    if not refs:
        return
    taken = {*(template.env or {}), *(data.get("env") or {}),
             *mounts_env(data.get("mounts") or [])}
    if template.token_env:
        taken.add(template.token_env)
    if template.engine == JOBSET:
        taken |= set(TORCHRUN_ENV)
    if data.get("checkpoint") is not None:
        taken.add(CHECKPOINT_ENV)
    # a secret's files never over a volume the launch mounts, nor a volume over them
    mounted = [mount.path for mount in data.get("mounts") or []]
    try:
        uses = secret_uses_clean(refs=refs, identity=identity, tenant=tenant,
                                 reserved=(*RESERVED_PATHS, *mounted), env_names=taken)
    except SecretInvalid as exc:
        errors.update(exc.errors)
        return
    names = {name: "" for use in uses for name in use.env_names}
    refused = env_template_problems(names, fixed_command=not template.takes_program)
    if refused:
        errors["secrets"] = refused
    data["secrets"] = uses


def _image_refusal(template: Template, image: str, tenant: Tenant | None, *,
                   replaced: bool) -> str | None:
    if replaced and not template.takes_image and image != template.image:
        return (f"The {template.name} template runs its own image ({template.image}); an "
                "admin can let researchers choose another.")
    return image_refusal(image, site=settings.PORTAL_IMAGE_REGISTRIES,
                         tenant=tenant.image_prefixes if tenant is not None else [],
                         tenant_name=tenant.name if tenant is not None else "")


def _launch_size(data: dict[str, Any], errors: dict[str, list[str]]) -> None:
    """The command, arguments and environment together within MAX_LAUNCH_BYTES; the refusal
    goes to the largest of the three."""
    sizes = {field: sum(len(item.encode()) + 1 for item in data.get(field) or [])
             for field in ("command", "args")}
    sizes["env"] = env_size(data.get("env") or {})
    total = sum(sizes.values())
    if total > MAX_LAUNCH_BYTES:
        field = max(sizes, key=sizes.__getitem__)
        errors.setdefault(field, []).append(
            f"The command, arguments and environment take {total // 1024} KiB together; a "
            f"launch may pass at most {MAX_LAUNCH_BYTES // 1024} KiB.")


def _runtime(data: dict[str, Any], errors: dict[str, list[str]], tenant: Tenant | None,
             quota: Quota | None) -> None:
    limit = quota.max_runtime_minutes if quota is not None else 0
    wanted = data.get("max_runtime_minutes")
    if limit and wanted and wanted > limit:
        who = tenant.name if tenant is not None else "The project"  # a quota is a tenant's
        errors["max_runtime_minutes"] = [f"{who} allows at most {limit} minutes per workload."]
    if not wanted and limit:
        data["max_runtime_minutes"] = limit


def _never_fits(data: dict[str, Any], errors: dict[str, list[str]]) -> None:
    """A request larger than any node of the type can never run: say so now (the launch
    advice's rule, advice.never_fits, which the checks before a launch show as an error)."""
    gpu_type: GpuType = data["gpu_type"]
    try:
        capacity = gpu_capacity(cluster=data.get("cluster")).get(gpu_type.slug)
    except KubeError:
        return  # cannot ask the cluster: admission proceeds, the scheduler will tell
    refusal = never_fits(capacity, gpu_type.slug, data["gpu_count"], data.get("nodes", 1))
    if refusal is not None:
        field, why = refusal
        errors[field] = [why]
