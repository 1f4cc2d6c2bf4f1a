"""Workload API shapes. `LaunchSerializer` reads a launch request's JSON into typed fields and
wraps the domain's launch validation (workloads/validation.py); the launch page's
LaunchForm wraps the same rules and bounds, so the API and the page accept and refuse the same
things."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar

from django.db.models import Manager
from drf_spectacular.utils import extend_schema_field
from rest_framework import exceptions, serializers, status

from access.api.serializers import WorkloadAccessSerializer
from api.errors import Category
from api.fields import WholeNumberField
from catalogue.environment import (
    MAX_ENV_VALUE,
)
from catalogue.fields import MAX_ARG_LENGTH, MAX_ARGV_ITEMS
from catalogue.models import GpuType, Template
from credentials.validation import MAX_PATH, MAX_SECRETS_PER_LAUNCH
from identity.identity import Identity
from tenants.models import Quota, Tenant
from workloads.queue import QueuePlace, queue_places, queue_text

from ..access import workload_access_summary
from ..launch_spec import launch_checkpoint, launch_secrets
from ..logs import redact
from ..manifests import CHECKPOINT_MOUNT_PATH
from ..models import Workload, WorkloadEvent
from ..selectors import annotate_clusters, workload_may_see_secrets
from ..validation import (
    IMAGE_MAX_LENGTH,
    NAME_MAX_LENGTH,
    NUMBER_BOUNDS,
    ClusterUnavailable,
    DistributedUnavailable,
    DraUnavailable,
    ImagePullRefused,
    LaunchInvalid,
    field_clean,
    launch_clean,
)

_T = TypeVar("_T")


def _bounds(field: str) -> dict[str, Any]:
    least, most = NUMBER_BOUNDS[field]
    return {"min_value": least, "max_value": most}


class ArgvField(serializers.ListField):
    """A command or its arguments: a list of strings passed as argv, never through a shell."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(child=serializers.CharField(max_length=MAX_ARG_LENGTH, allow_blank=True,
                                                     trim_whitespace=False),
                         max_length=MAX_ARGV_ITEMS, required=False, **kwargs)

    def to_internal_value(self, data: Any) -> list[str]:
        values: list[str] = super().to_internal_value(data)
        if any("\x00" in value for value in values):
            raise serializers.ValidationError("NUL characters are not allowed.")
        return values


class DistributedUnavailableError(exceptions.APIException):
    """400: a distributed launch on a cluster without its engine (or without Kueue)."""

    status_code = status.HTTP_400_BAD_REQUEST
    default_code = DistributedUnavailable.code


class ClusterUnavailableError(exceptions.APIException):
    """409: the cluster named is disabled or does not answer now; another may take it."""

    status_code = status.HTTP_409_CONFLICT
    default_code = ClusterUnavailable.code
    category = Category.CONFLICT


class DraUnavailableError(exceptions.APIException):
    """400: a launch of a GPU type claimed through DRA on a cluster without resource.k8s.io/v1."""

    status_code = status.HTTP_400_BAD_REQUEST
    default_code = DraUnavailable.code


class ImagePullRefusedError(exceptions.APIException):
    """400: the image's registry refused the launch's registry secret, or has no such image;
    its code says which (registry_login_failed, image_not_readable, image_not_found)."""

    status_code = status.HTTP_400_BAD_REQUEST
    default_code = "image_pull_refused"


class SecretRefSerializer(serializers.Serializer[dict[str, Any]]):
    """A secret a launch reads: its id (GET /api/v1/secrets/), and where a file or s3
    secret's files go."""

    secret = WholeNumberField(min_value=1, max_value=2**63 - 1)
    path = serializers.CharField(max_length=MAX_PATH, required=False, allow_blank=True,
                                 help_text="file and s3 secrets: the directory its files are "
                                           "mounted at, read-only (default /run/secrets/NAME)")


class WorkloadSecretSerializer(serializers.Serializer[Any]):
    name = serializers.CharField()
    kind = serializers.CharField()
    path = serializers.CharField(help_text="where its files are mounted; empty for env and "
                                           "registry secrets")


class MountSerializer(serializers.Serializer[dict[str, Any]]):
    """One volume or dataset the workload mounts: by its id, at an absolute path in every
    container that runs the program (every rank of a group)."""

    volume = WholeNumberField(required=False, min_value=1, max_value=2**63 - 1,
                                      help_text="a volume's id (GET volumes/): the source")
    dataset = WholeNumberField(required=False, min_value=1, max_value=2**63 - 1,
                                       help_text="or a dataset's id (GET datasets/), always "
                                                 "read-only")
    path = serializers.CharField(max_length=1024, required=False,
                                 help_text="absolute; not a system path (a dataset's default: "
                                           "/datasets/<name>)")
    # a field named like Field.read_only: DRF's metaclass takes it out of the class attributes
    read_only = serializers.BooleanField(  # type: ignore[assignment]
        required=False, help_text="a volume's: default false; a dataset's: only true")

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        """The typed fields, and any other key as sent: the mount resolver (workloads/mounts.py)
        names what it does not know, rather than a launch quietly mounting less."""
        typed: dict[str, Any] = super().to_internal_value(data)
        return {**{k: v for k, v in data.items() if k not in self.fields}, **typed}


class CheckpointSerializer(serializers.Serializer[dict[str, Any]]):
    """A batch job's checkpoint directory: a folder of a volume it may mount, mounted
    read-write and named by PORTAL_CHECKPOINT_DIR; a requeued copy gets the same folder."""

    volume = WholeNumberField(required=False, min_value=1, max_value=2**63 - 1,
                                      help_text="a volume's id (GET volumes/), not a dataset's")
    path = serializers.CharField(
        max_length=1024, required=False, allow_blank=True,
        help_text="the folder of the volume (e.g. runs/llama); default checkpoints/<the "
                  "workload's object name>")

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        """Any other key as sent too: the resolver (workloads/mounts.py) refuses it by name."""
        typed: dict[str, Any] = super().to_internal_value(data)
        extra = {k: v for k, v in data.items() if k not in self.fields} \
            if isinstance(data, dict) else {}
        return {**extra, **typed}


class WorkloadCheckpointSerializer(serializers.Serializer[Any]):
    volume = serializers.IntegerField(help_text="the volume's id")
    name = serializers.CharField(help_text="the volume's name")
    claim_name = serializers.CharField(source="claim")
    folder = serializers.CharField(help_text="the folder of the volume (the file browser's path)")
    directory = serializers.CharField(help_text="where the program finds it: "
                                                "PORTAL_CHECKPOINT_DIR")


class WorkloadMountSerializer(serializers.Serializer[Any]):
    volume = serializers.IntegerField(source="volume_id", allow_null=True,
                                      help_text="null for a dataset, and once the volume is "
                                                "deleted")
    dataset = serializers.IntegerField(source="dataset_id", allow_null=True,
                                       help_text="the dataset's id (null for a volume, and "
                                                 "once the dataset is withdrawn)")
    name = serializers.CharField(source="volume_name")
    claim_name = serializers.CharField()
    path = serializers.CharField()
    read_only = serializers.BooleanField()  # type: ignore[assignment] # named like Field's


class LaunchSerializer(serializers.Serializer[dict[str, Any]]):
    name = serializers.CharField(max_length=NAME_MAX_LENGTH)
    template = serializers.SlugRelatedField(slug_field="slug", queryset=Template.objects.all())
    gpu_type = serializers.SlugRelatedField(slug_field="slug", queryset=GpuType.objects.all())
    gpu_count = WholeNumberField(**_bounds("gpu_count"), help_text="GPUs per node")
    cluster = serializers.CharField(
        max_length=40, required=False, allow_blank=True,
        help_text="the cluster to run on, by name (GET clusters/); default: the home cluster")
    nodes = WholeNumberField(**_bounds("nodes"), required=False, default=1,
                             help_text="how many nodes (distributed templates: "
                                       "pytorch-ddp, mpi); gpu_count GPUs on each")
    kind = serializers.ChoiceField(choices=Template.Kind.choices, required=False)
    image = serializers.CharField(max_length=IMAGE_MAX_LENGTH, required=False, allow_blank=True)
    command = ArgvField()
    args = ArgvField()
    env = serializers.DictField(child=serializers.CharField(max_length=MAX_ENV_VALUE,
                                                            allow_blank=True, trim_whitespace=False),
                                required=False)
    port = WholeNumberField(**_bounds("port"), required=False, allow_null=True)
    cpu = WholeNumberField(**_bounds("cpu"), required=False)
    memory = WholeNumberField(**_bounds("memory"), required=False, help_text="GiB")
    max_runtime_minutes = WholeNumberField(**_bounds("max_runtime_minutes"),
                                           required=False, allow_null=True)
    retries = WholeNumberField(**_bounds("retries"), required=False,
                               help_text="batch only: how often a failed run is retried")
    use_home = serializers.BooleanField(
        required=False, default=False,
        help_text="mount the project's volume `home` at /home/portal (made the first time)")
    mounts = MountSerializer(many=True, required=False,
                             help_text="volumes and datasets to mount: [{volume, path, "
                                       "read_only?} | {dataset, path?}]")
    checkpoint = CheckpointSerializer(
        required=False, allow_null=True,
        help_text="batch only: a checkpoint directory on a volume, in PORTAL_CHECKPOINT_DIR; "
                  "a requeued copy (reclaim, maintenance, a reservation's end) gets the same")
    ssh = serializers.BooleanField(
        required=False, allow_null=True, default=None,
        help_text="run the portal's SSH server beside the program (templates that offer it: "
                  "jupyter, code-server, custom services); default: the template's choice")
    public = serializers.BooleanField(
        required=False, default=False,
        help_text="service only: open it to anyone, without the portal's login in front "
                  "(only where an admin allows it for the project; audited)")
    secrets = serializers.ListField(
        child=SecretRefSerializer(), required=False, max_length=MAX_SECRETS_PER_LAUNCH,
        help_text="your own and the project's secrets it reads: env → its variables (by "
                  "reference), file → its files at `path`, registry → the pull login for the "
                  "image, s3 → the AWS variables and an rclone config (RCLONE_CONFIG)")

    def __init__(self, *args: Any, tenant: Tenant | None = None, quota: Quota | None = None,
                 check_capacity: bool = True, identity: Identity | None = None,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.identity = identity
        self.tenant = tenant
        self.quota = quota
        self.check_capacity = check_capacity
        self.identity = identity

    def validate_name(self, value: str) -> str:
        return self._field("name", value)

    def validate_template(self, template: Template) -> Template:
        return self._field("template", template)

    def validate_gpu_type(self, gpu_type: GpuType) -> GpuType:
        return self._field("gpu_type", gpu_type)

    def validate_env(self, env: dict[str, str]) -> dict[str, str]:
        return self._field("env", env)

    @staticmethod
    def _field(field: str, value: _T) -> _T:
        """`value` through its field's rule, which hands back a value of its type."""
        try:
            cleaned: _T = field_clean(field, value)
            return cleaned
        except LaunchInvalid as exc:
            raise serializers.ValidationError(exc.errors[field]) from exc

    def validate(self, data: dict[str, Any]) -> dict[str, Any]:
        """The domain's rules (workloads/validation.py) on the typed request."""
        try:
            return launch_clean(request=data, tenant=self.tenant, quota=self.quota,
                                check_capacity=self.check_capacity, identity=self.identity)
        except LaunchInvalid as exc:
            raise serializers.ValidationError(exc.errors) from exc
        except DistributedUnavailable as exc:
            raise DistributedUnavailableError(str(exc)) from exc
        except DraUnavailable as exc:
            raise DraUnavailableError(str(exc)) from exc
        except ClusterUnavailable as exc:
            raise ClusterUnavailableError(str(exc)) from exc
        except ImagePullRefused as exc:
            raise ImagePullRefusedError(str(exc), code=exc.code) from exc


class WorkloadListSerializer(serializers.ListSerializer[Iterable[Workload]]):
    """A list's queued workloads get their queue places with one request per tenant queue and
    one estimate per GPU type, not one each."""

    def to_representation(self, data: Manager[Workload] | Iterable[Workload]) -> list[Any]:
        items = list(data.all() if hasattr(data, "all") else data)
        assert self.child is not None  # a ListSerializer has its child
        self.child.context["queue_places"] = queue_places(items)
        annotate_clusters(items)
        self.child.context["clusters_annotated"] = True
        return super().to_representation(items)


class RankSerializer(serializers.Serializer[dict[str, Any]]):
    """One pod of a distributed workload, as the tracker last saw it."""

    rank = serializers.IntegerField(allow_null=True, help_text="null: the MPI launcher")
    role = serializers.ChoiceField(choices=["worker", "launcher"])
    pod = serializers.CharField()
    node = serializers.CharField(allow_blank=True)
    state = serializers.CharField()
    reason = serializers.CharField(allow_blank=True)
    exit_code = serializers.IntegerField(allow_null=True)


class WorkloadSerializer(serializers.ModelSerializer[Workload]):
    tenant = serializers.CharField(source="tenant.name")
    tenant_id = serializers.IntegerField()
    owner = serializers.CharField(source="owner.label", help_text="the owner's name, with "
                                  "their domain outside the default one")
    owner_id = serializers.CharField(source="owner.username", help_text="the owner's Keystone "
                                     "user id")
    template = serializers.CharField(source="template.slug")
    gpu_type = serializers.CharField(source="gpu_type.slug")
    state = serializers.ChoiceField(
        source="shown_state", choices=[*Workload.State.values, Workload.UNKNOWN],
        help_text="unknown: its cluster does not answer now (the reason says since when); it "
                  "shows its real state again once the cluster answers")
    reason = serializers.CharField(source="shown_reason", allow_blank=True)
    memory = serializers.IntegerField(source="memory_gb")
    mounts = WorkloadMountSerializer(many=True, read_only=True,
                                     help_text="the volumes it mounts (the home volume too) and the "
                                               "datasets")
    ranks = RankSerializer(many=True, read_only=True,
                           help_text="a distributed workload's pods, one per rank (and the MPI "
                                     "launcher); empty for one pod")
    url = serializers.SerializerMethodField()
    access = serializers.SerializerMethodField()
    queue_position = serializers.SerializerMethodField(
        help_text="Queued: its place in its project's queue (1 = next); null otherwise, or "
                  "while Kueue has not listed it yet.")
    queue_length = serializers.SerializerMethodField(
        help_text="Queued: how many wait in its project's queue.")
    eta = serializers.SerializerMethodField(
        help_text="Queued: the portal's estimate of when it starts; null when there is none.")
    eta_basis = serializers.SerializerMethodField(
        help_text="Queued: what the estimate rests on, or why there is none.")
    gpus = serializers.CharField(
        source="gpus_text", read_only=True,
        help_text="Its GPUs in the portal's words: \"1× a100\", \"2 nodes × 4× a100 (8 GPUs)\".")
    queue_text = serializers.SerializerMethodField(
        help_text="Queued: its place and estimate in the portal's words (\"queued — position 3 "
                  "of 7 for a100, about 40 min\"); null otherwise.")
    queue_reason = serializers.SerializerMethodField(
        help_text="Queued: why Kueue holds it, in the portal's words (\"Waiting for 1 more a100 "
                  "nvidia.com/gpu: the project's quota and what it may borrow are in use.\", "
                  "\"Preempted by a workload of higher priority (priority 1000) …\"); null "
                  "when not queued or Kueue has said nothing yet.")
    queue_kueue_message = serializers.SerializerMethodField(
        help_text="Queued: Kueue's own text behind queue_reason (its QuotaReserved message or "
                  "the event it wrote), without other projects' queues, cohorts or uids; null "
                  "as queue_reason.")
    secrets = serializers.SerializerMethodField(
        help_text="the secrets it was launched with, by name (never a value)")
    checkpoint = serializers.SerializerMethodField(
        help_text="its checkpoint directory, or null")

    class Meta:
        model = Workload
        fields = ["id", "name", "tenant", "tenant_id", "owner", "owner_id", "template", "kind", "gpu_type",
                  "cluster",
                  "gpu_count", "nodes", "ranks", "mounts", "image", "command", "args", "port", "cpu",
                  "memory",
                  "max_runtime_minutes", "ssh", "state", "reason", "url", "address", "node",
                  "exit_code", "object_name", "created_at", "started_at", "finished_at",
                  "expires_at", "access", "queue_position", "queue_length", "eta",
                  "eta_basis", "gpus", "queue_text", "queue_reason", "queue_kueue_message",
                  "secrets", "checkpoint"]
        read_only_fields = fields
        list_serializer_class = WorkloadListSerializer

    def _place(self, workload: Workload) -> QueuePlace | None:
        if workload.state != Workload.State.QUEUED:
            return None
        places = self.context.get("queue_places")
        if places is None:
            places = self.context["queue_places"] = queue_places([workload])
        return places.get(workload.pk)

    @extend_schema_field(serializers.IntegerField(allow_null=True))
    def get_queue_position(self, workload: Workload) -> int | None:
        place = self._place(workload)
        return place.position if place else None

    @extend_schema_field(serializers.IntegerField(allow_null=True))
    def get_queue_length(self, workload: Workload) -> int | None:
        place = self._place(workload)
        return place.length if place else None

    @extend_schema_field(serializers.DateTimeField(allow_null=True))
    def get_eta(self, workload: Workload) -> str | None:
        place = self._place(workload)
        return place.eta.isoformat() if place and place.eta else None

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_eta_basis(self, workload: Workload) -> str | None:
        place = self._place(workload)
        return place.eta_basis if place else None

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_queue_text(self, workload: Workload) -> str | None:
        if workload.state != Workload.State.QUEUED:
            return None
        return queue_text(workload, self._place(workload))

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_queue_reason(self, workload: Workload) -> str | None:
        place = self._place(workload)
        return place.reason or None if place else None

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_queue_kueue_message(self, workload: Workload) -> str | None:
        place = self._place(workload)
        return place.kueue_message or None if place else None

    @extend_schema_field(WorkloadSecretSerializer(many=True))
    def get_secrets(self, workload: Workload) -> list[dict[str, str]]:
        return [{"name": use.name, "kind": use.kind, "path": use.path}
                for use in launch_secrets(workload)]

    @extend_schema_field(WorkloadCheckpointSerializer(allow_null=True))
    def get_checkpoint(self, workload: Workload) -> dict[str, Any] | None:
        checkpoint = launch_checkpoint(workload)
        if checkpoint is None:
            return None
        return WorkloadCheckpointSerializer(
            {**checkpoint, "directory": CHECKPOINT_MOUNT_PATH}).data

    def get_url(self, workload: Workload) -> str:
        return workload.url

    def to_representation(self, workload: Workload) -> dict[str, Any]:
        if not self.context.get("clusters_annotated"):
            annotate_clusters([workload])  # one workload's answer (a list's did them all)
        data = super().to_representation(workload)
        request = self.context.get("request")
        if request is not None and not workload_may_see_secrets(
                getattr(request, "identity", None), workload):
            # a token passed as an argument (--ServerApp.token=…) is not for readers' eyes
            secrets = (workload.access_token,)
            data["command"] = [redact(item, secrets) for item in data["command"]]
            data["args"] = [redact(item, secrets) for item in data["args"]]
        return data

    @extend_schema_field(WorkloadAccessSerializer(allow_null=True))
    def get_access(self, workload: Workload) -> dict[str, Any] | None:
        return workload_access_summary(workload)


class WorkloadEventSerializer(serializers.ModelSerializer[WorkloadEvent]):
    class Meta:
        model = WorkloadEvent
        fields = ["at", "type", "reason", "message", "source", "count"]
        read_only_fields = fields


class LaunchNoteSerializer(serializers.Serializer[tuple[str, str]]):
    level = serializers.ChoiceField(choices=["error", "warning", "info"])
    message = serializers.CharField()


class LaunchCheckSerializer(serializers.Serializer[dict[str, Any]]):
    """What a launch would be told before it is submitted (nothing is launched): the notes of
    the apps that advise on launches, e.g. a GPU-hour budget its maximum runtime would cross."""

    notes = LaunchNoteSerializer(many=True)
