"""Workload API shapes. `LaunchSerializer` is the one validation of a launch request: the
REST API and the launch page both use it, so they accept and refuse the same things."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from portal.access.serializers import WorkloadAccessSerializer
from portal.access.services import tenant_service_access, workload_access_summary
from portal.cluster.capacity import gpu_capacity
from portal.kube.client import KubeError
from portal.queueing.selectors import QueuePlace, queue_places
from tenants.selectors import tenant_admits_root, tenant_pod_security

from ..environment import (
    MAX_ENV_VALUE,
    env_problems,
    env_template_problems,
    gpu_stack_refusal,
)
from ..images import image_refusal, validate_image_reference
from ..logs import redact
from ..models import GpuType, Template, Workload, WorkloadEvent
from ..naming import display_name_clean
from ..selectors import workload_may_see_secrets

MAX_ARGV_ITEMS = 256
MAX_ARG_LENGTH = 4096


class ArgvField(serializers.ListField):
    """A command or its arguments: a list of strings passed as argv, never through a shell."""

    def __init__(self, **kwargs):
        super().__init__(child=serializers.CharField(max_length=MAX_ARG_LENGTH, allow_blank=True,
                                                     trim_whitespace=False),
                         max_length=MAX_ARGV_ITEMS, required=False, **kwargs)

    def to_internal_value(self, data):
        values = super().to_internal_value(data)
        if any("\x00" in value for value in values):
            raise serializers.ValidationError("NUL characters are not allowed.")
        return values


class LaunchSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=200)
    template = serializers.SlugRelatedField(slug_field="slug", queryset=Template.objects.all())
    gpu_type = serializers.SlugRelatedField(slug_field="slug", queryset=GpuType.objects.all())
    gpu_count = serializers.IntegerField(min_value=1, max_value=64)
    kind = serializers.ChoiceField(choices=Template.Kind.choices, required=False)
    image = serializers.CharField(max_length=512, required=False, allow_blank=True)
    command = ArgvField()
    args = ArgvField()
    env = serializers.DictField(child=serializers.CharField(max_length=MAX_ENV_VALUE,
                                                            allow_blank=True, trim_whitespace=False),
                                required=False)
    port = serializers.IntegerField(min_value=1, max_value=65535, required=False, allow_null=True)
    cpu = serializers.IntegerField(min_value=1, max_value=256, required=False)
    memory = serializers.IntegerField(min_value=1, max_value=4096, required=False,
                                      help_text="GiB")
    max_runtime_minutes = serializers.IntegerField(min_value=1, max_value=60 * 24 * 365,
                                                   required=False, allow_null=True)
    retries = serializers.IntegerField(min_value=0, max_value=10, required=False,
                                       help_text="batch only: how often a failed run is retried")
    use_home = serializers.BooleanField(required=False, default=False)
    public = serializers.BooleanField(
        required=False, default=False,
        help_text="service only: open it to anyone, without the portal's login in front "
                  "(only where an admin allows it for the project; audited)")

    def __init__(self, *args, tenant=None, quota=None, check_capacity: bool = True, **kwargs):
        super().__init__(*args, **kwargs)
        self.tenant = tenant
        self.quota = quota
        self.check_capacity = check_capacity

    def validate_name(self, value: str) -> str:
        try:
            return display_name_clean(value)
        except ValueError as exc:
            raise serializers.ValidationError(str(exc)) from exc

    def validate_template(self, template: Template) -> Template:
        if not template.enabled:
            raise serializers.ValidationError(f"The {template.name} template is disabled.")
        return template

    def validate_gpu_type(self, gpu_type: GpuType) -> GpuType:
        if not gpu_type.enabled:
            raise serializers.ValidationError(f"The {gpu_type.slug} GPU type is disabled.")
        return gpu_type

    def validate_env(self, env: dict[str, str]) -> dict[str, str]:
        problems = env_problems(env)  # portal/workloads/environment.py: the one rule
        if problems:
            raise serializers.ValidationError(problems)
        return env

    def validate(self, data: dict[str, Any]) -> dict[str, Any]:
        errors: dict[str, list[str]] = {}
        template: Template = data["template"]
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
        if not template.custom and data.get("command"):
            errors["command"] = ["Only the custom template takes a command."]
        if image and "image" not in errors:
            try:
                image = validate_image_reference(image)
            except ValueError as exc:
                errors["image"] = [str(exc)]
            else:
                refusal = self._image_refusal(template, image, replaced=bool(given))
                if refusal:
                    errors["image"] = [refusal]
        data["image"] = image
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
            elif self.tenant is not None and not tenant_service_access(self.tenant).allow_public:
                errors["public"] = [f"{self.tenant.name} may not open workloads to everyone; an "
                                    "admin can allow it."]
        # a template saved before the GPU stack's variables were refused must not pass them on
        inherited = [refusal for key in template.env if (refusal := gpu_stack_refusal(key))]
        if inherited:
            errors["template"] = [f"The {template.name} template sets a variable the portal no "
                                  f"longer passes; an admin must remove it. {inherited[0]}"]
        if template.allow_root and self.tenant is not None and \
                not tenant_admits_root(self.tenant):
            errors.setdefault("template", []).append(
                f"The {template.name} template may run as root, which {self.tenant.name}'s "
                f"namespace does not admit (Pod Security “{tenant_pod_security(self.tenant)}”); "
                "an admin can allow root for the project.")
        env_refused = env_template_problems(data.get("env", {}), token_env=template.token_env,
                                            fixed_command=not template.custom)
        if env_refused:
            errors["env"] = env_refused
        data.setdefault("cpu", template.default_cpu)
        data.setdefault("memory", template.default_memory_gb)
        self._runtime(data, errors)
        if self.check_capacity and "gpu_type" in data:
            self._never_fits(data, errors)
        if errors:
            raise serializers.ValidationError(errors)
        return data

    def _image_refusal(self, template: Template, image: str, *, replaced: bool) -> str | None:
        if replaced and not template.takes_image and image != template.image:
            return (f"The {template.name} template runs its own image ({template.image}); an "
                    "admin can let researchers choose another.")
        tenant = self.tenant
        return image_refusal(image, site=settings.PORTAL_IMAGE_REGISTRIES,
                             tenant=tenant.image_prefixes if tenant is not None else [],
                             tenant_name=tenant.name if tenant is not None else "")

    def _runtime(self, data: dict[str, Any], errors: dict[str, list[str]]) -> None:
        limit = self.quota.max_runtime_minutes if self.quota is not None else 0
        wanted = data.get("max_runtime_minutes")
        if limit and wanted and wanted > limit:
            errors["max_runtime_minutes"] = [
                f"{self.tenant.name} allows at most {limit} minutes per workload."]
        if not wanted and limit:
            data["max_runtime_minutes"] = limit

    def _never_fits(self, data: dict[str, Any], errors: dict[str, list[str]]) -> None:
        """A request larger than any node of the type can never run: say so now."""
        gpu_type: GpuType = data["gpu_type"]
        try:
            capacity = gpu_capacity().get(gpu_type.slug)
        except KubeError:
            return  # cannot ask the cluster: admission proceeds, the scheduler will tell
        if capacity is None or capacity.nodes == 0:
            errors["gpu_type"] = [f"No node of the cluster offers {gpu_type.slug} GPUs."]
        elif data["gpu_count"] > capacity.largest_node:
            errors["gpu_count"] = [
                f"No {gpu_type.slug} node has {data['gpu_count']} GPUs "
                f"(the largest has {capacity.largest_node}); this request can never run."]


class WorkloadListSerializer(serializers.ListSerializer):
    """A list's queued workloads get their queue places with one request per tenant queue and
    one estimate per GPU type, not one each."""

    def to_representation(self, data):
        items = list(data.all() if hasattr(data, "all") else data)
        self.child.context["queue_places"] = queue_places(items)
        return super().to_representation(items)


class WorkloadSerializer(serializers.ModelSerializer):
    tenant = serializers.CharField(source="tenant.name")
    tenant_id = serializers.IntegerField()
    owner = serializers.CharField(source="owner.username")
    template = serializers.CharField(source="template.slug")
    gpu_type = serializers.CharField(source="gpu_type.slug")
    memory = serializers.IntegerField(source="memory_gb")
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

    class Meta:
        model = Workload
        fields = ["id", "name", "tenant", "tenant_id", "owner", "template", "kind", "gpu_type",
                  "gpu_count", "image", "command", "args", "port", "cpu", "memory",
                  "max_runtime_minutes", "state", "reason", "url", "address", "node",
                  "exit_code", "object_name", "created_at", "started_at", "finished_at",
                  "expires_at", "access", "queue_position", "queue_length", "eta",
                  "eta_basis"]
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

    def get_url(self, workload: Workload) -> str:
        return workload.url

    def to_representation(self, workload: Workload) -> dict[str, Any]:
        data = super().to_representation(workload)
        request = self.context.get("request")
        if request is not None and not workload_may_see_secrets(
                getattr(request, "identity", None), workload, request.user):
            # a token passed as an argument (--ServerApp.token=…) is not for readers' eyes
            secrets = (workload.access_token,)
            data["command"] = [redact(item, secrets) for item in data["command"]]
            data["args"] = [redact(item, secrets) for item in data["args"]]
        return data

    @extend_schema_field(WorkloadAccessSerializer(allow_null=True))
    def get_access(self, workload: Workload) -> dict[str, Any] | None:
        return workload_access_summary(workload)


class WorkloadEventSerializer(serializers.ModelSerializer):
    class Meta:
        model = WorkloadEvent
        fields = ["at", "type", "reason", "message", "source", "count"]
        read_only_fields = fields


class GpuTypeSerializer(serializers.Serializer):
    """A GPU type with the cluster's live capacity (null when the cluster is unreachable)."""

    slug = serializers.SlugField()
    name = serializers.CharField()
    resource_name = serializers.CharField()
    node_selector = serializers.DictField(child=serializers.CharField())
    memory_gb = serializers.IntegerField()
    capacity = serializers.IntegerField(allow_null=True, help_text="GPUs the nodes have")
    allocatable = serializers.IntegerField(allow_null=True,
                                           help_text="GPUs the nodes offer (healthy, schedulable)")
    allocated = serializers.IntegerField(allow_null=True, help_text="GPUs that running pods hold")
    free = serializers.IntegerField(allow_null=True,
                                    help_text="allocatable less the portal's active workloads")
    largest_node = serializers.IntegerField(allow_null=True)
    largest_free_block = serializers.IntegerField(
        allow_null=True, help_text="the most GPUs free on one node: the largest request that fits now")
    nodes = serializers.IntegerField(allow_null=True)


class TemplateSerializer(serializers.ModelSerializer):
    cpu = serializers.IntegerField(source="default_cpu")
    memory = serializers.IntegerField(source="default_memory_gb")
    image_replaceable = serializers.BooleanField(
        source="takes_image", help_text="whether a launch may give an image of its own (from "
                                        "the allowed registries); otherwise `image` runs")

    class Meta:
        model = Template
        fields = ["slug", "name", "description", "kind", "custom", "image",
                  "image_replaceable", "port", "cpu", "memory"]
        read_only_fields = fields
