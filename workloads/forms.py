"""The launch page's form: its fields → a typed launch request, checked by the domain's rules.

The page has text areas where the API has lists and maps: a command or its arguments one per
line (each line one argv item, never passed through a shell) and environment variables as
KEY=value lines. `launch_request` reads the submitted fields; `LaunchForm` types them with the
bounds the API's serializer declares too (workloads/validation.py) and runs the same
`launch_clean`, so the page and the API accept and refuse the same requests. No DRF here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django import forms
from django.core.exceptions import NON_FIELD_ERRORS
from django.http import QueryDict

from catalogue.fields import MAX_ARG_LENGTH, MAX_ARGV_ITEMS, argv_lines, env_lines
from catalogue.models import GpuType, Template
from core.validation import WholeNumberFormField
from identity.identity import Identity
from storage.selectors import volumes_mountable
from tenants.models import Quota, Tenant

from .validation import (
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

if TYPE_CHECKING:
    from identity.identity import Identity

# the form's fields in page order, with their labels (the error summary links to them)
FIELD_LABELS = {
    "name": "Name", "template": "Template", "gpu_type": "GPU type", "cluster": "Cluster",
    "gpu_count": "GPUs",
    "nodes": "Nodes", "cpu": "CPU cores", "memory": "Memory (GiB)", "max_runtime_minutes": "Maximum runtime",
    "use_home": "Home volume", "kind": "Kind", "image": "Image", "command": "Command",
    "args": "Arguments", "env": "Environment", "port": "Port", "retries": "Retries",
    "public": "Public", "ssh": "SSH", "secrets": "Secrets", "mounts": "Volumes",
    "checkpoint": "Checkpoint directory",
}

# fields the page always sends (blank numbers are left out so the template defaults apply)
COMMON_FIELDS = ("name", "template", "gpu_type", "gpu_count")
# blank: one node (a template that runs one pod never shows the field; the rules refuse more)
OPTIONAL_NUMBERS = ("nodes", "cpu", "memory", "max_runtime_minutes")
# fields only the custom template shows
CUSTOM_TEXT_FIELDS = ("kind", "image", "port", "retries")
# and a distributed one (pytorch-ddp, mpi): its image field is the replaceable templates' one
DISTRIBUTED_TEXT_FIELDS = ("retries",)


def launch_request(post: QueryDict, template: Template | None) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """The submitted form → (data for LaunchForm, errors found while reading the form)."""
    data: dict[str, Any] = {field: post.get(field, "").strip() for field in COMMON_FIELDS}
    errors: dict[str, list[str]] = {}
    for field in OPTIONAL_NUMBERS:
        value = post.get(field, "").strip()
        if value:
            data[field] = value
    data["use_home"] = bool(post.get("use_home"))
    data["cluster"] = post.get("cluster", "").strip()  # offered where there are several
    # the secrets ticked (the page mounts a file or s3 secret at its default path)
    data["secrets"] = [{"secret": int(value)} for value in post.getlist("secrets")
                       if value.isascii() and value.isdigit() and len(value) < 19]
    data["public"] = bool(post.get("public"))
    data["mounts"], mount_errors = mount_lines(post.get("mounts", ""))
    if mount_errors:
        errors["mounts"] = mount_errors
    # the datasets ticked, each at its default path
    data["mounts"] += [{"dataset": int(value)} for value in post.getlist("datasets")
                       if value.isascii() and value.isdigit() and len(value) < 19]
    checkpoint = post.get("checkpoint", "").strip()
    if checkpoint:  # VOLUME[:FOLDER], as gpuctl's --checkpoint
        volume, _, folder = checkpoint.partition(":")
        data["checkpoint"] = {"volume": volume.strip(), **({"path": folder} if folder else {})}
    if template is not None and template.ssh:
        # a checkbox: left unticked, the launch asks for no SSH
        data["ssh"] = "true" if post.get("ssh") else "false"
    if template is not None and template.image_replaceable and not template.custom:
        image = post.get("image", "").strip()
        if image:  # blank: the template's own
            data["image"] = image
    if template is not None and template.allowed_args and not template.custom:
        data["args"] = argv_lines(post.get("args", ""))  # the options it declares, if any
    if template is not None and template.takes_program:
        # the custom template's program, or the one a group runs on every node
        for field in CUSTOM_TEXT_FIELDS if template.custom else DISTRIBUTED_TEXT_FIELDS:
            value = post.get(field, "").strip()
            if value:
                data[field] = value
        data["command"] = argv_lines(post.get("command", ""))
        data["args"] = argv_lines(post.get("args", ""))
        env, env_errors = env_lines(post.get("env", ""))
        data["env"] = env
        if env_errors:
            errors["env"] = env_errors
    return data, errors


def mount_lines(text: str) -> tuple[list[dict[str, Any]], list[str]]:
    """The volumes field: a line per mount, `VOLUME:/path` or `VOLUME:/path:ro` (VOLUME: a
    volume's id or name, as gpuctl's --mount) → mounts as the API takes them, the volume
    still as typed (LaunchForm finds it), and the lines it cannot read."""
    mounts: list[dict[str, Any]] = []
    problems: list[str] = []
    for number, line in enumerate(argv_lines(text), start=1):
        volume, sep, rest = line.strip().partition(":")
        read_only = rest.endswith(":ro")
        path = rest[:-3] if read_only else rest
        if not sep or not volume.strip() or not path:
            problems.append(f"Line {number}: write VOLUME:/path or VOLUME:/path:ro.")
            continue
        mounts.append({"volume": volume.strip(), "path": path, "read_only": read_only})
    return mounts, problems


def argv_problems(lines: list[str]) -> list[str]:
    """Why a command's or its arguments' lines may not be an argv, or []."""
    problems = []
    if len(lines) > MAX_ARGV_ITEMS:
        problems.append(f"At most {MAX_ARGV_ITEMS} lines.")
    problems += [f"Line {number}: Ensure this field has no more than {MAX_ARG_LENGTH} "
                 "characters." for number, line in enumerate(lines, start=1)
                 if len(line) > MAX_ARG_LENGTH]
    if any("\x00" in line for line in lines):
        problems.append("NUL characters are not allowed.")
    return problems


# a text field left empty says what the API says of an empty string
BLANK = {"required": "This field may not be blank."}


def _number(field: str, *, required: bool = False) -> WholeNumberFormField:
    least, most = NUMBER_BOUNDS[field]
    return WholeNumberFormField(min_value=least, max_value=most, required=required)


class LaunchForm(forms.Form):
    """A launch request from the page, typed and checked; `request` is what to admit."""

    name = forms.CharField(max_length=NAME_MAX_LENGTH, error_messages=BLANK)
    template = forms.ModelChoiceField(Template.objects.all(), to_field_name="slug")
    gpu_type = forms.ModelChoiceField(GpuType.objects.all(), to_field_name="slug")
    gpu_count = _number("gpu_count", required=True)  # per node
    cluster = forms.CharField(max_length=40, required=False)
    nodes = _number("nodes")
    kind = forms.ChoiceField(choices=Template.Kind.choices, required=False)
    image = forms.CharField(max_length=IMAGE_MAX_LENGTH, required=False)
    port = _number("port")
    cpu = _number("cpu")
    memory = _number("memory")
    max_runtime_minutes = _number("max_runtime_minutes")
    retries = _number("retries")
    use_home = forms.BooleanField(required=False)
    public = forms.BooleanField(required=False)
    ssh = forms.NullBooleanField(required=False)

    # read from text areas by launch_request, typed already
    LISTS = ("command", "args", "env", "secrets", "mounts", "checkpoint")

    def __init__(self, data: dict[str, Any], *, tenant: Tenant | None = None,
                 quota: Quota | None = None, identity: Identity | None = None) -> None:
        super().__init__({k: v for k, v in data.items() if k not in self.LISTS})
        self.lists = {k: data[k] for k in self.LISTS if k in data}
        self.list_errors: dict[str, list[str]] = {}
        self.tenant, self.quota, self.identity = tenant, quota, identity
        self.request: dict[str, Any] | None = None

    def is_valid(self) -> bool:
        return super().is_valid() and not self.list_errors and self.request is not None

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data
        for field in ("command", "args"):
            problems = argv_problems(self.lists.get(field, []))
            if problems:
                self._error(field, problems)
        for field in ("name", "template", "gpu_type"):
            if cleaned.get(field) is not None:
                self._rule(field, cleaned)
        if "env" in self.lists:
            self._rule("env", self.lists)
        if self.errors or self.list_errors:
            return cleaned  # the rules below need every field typed
        # what was not given stays out: the template decides it (as with the API)
        request = {k: v for k, v in cleaned.items() if v is not None and v != ""}
        request.update(self.lists)
        if request.get("mounts") and self.tenant is not None:
            request["mounts"] = [{**m, "volume": self._volume_id(m["volume"])}
                                 if "volume" in m else m for m in request["mounts"]]
        if request.get("checkpoint") and self.tenant is not None:
            request["checkpoint"] = {**request["checkpoint"],
                                     "volume": self._volume_id(request["checkpoint"]["volume"])}
        try:
            self.request = launch_clean(request=request, tenant=self.tenant, quota=self.quota,
                                        identity=self.identity)
        except LaunchInvalid as exc:
            for field, messages in exc.errors.items():
                self._error(field, messages)
        except DistributedUnavailable as exc:  # the API's 400 distributed_unavailable
            self._error("template", [str(exc)])
        except DraUnavailable as exc:  # the API's 400 dra_unavailable
            self._error("gpu_type", [str(exc)])
        except ClusterUnavailable as exc:  # the API's 409 cluster_unavailable
            self._error("cluster", [str(exc)])
        except ImagePullRefused as exc:  # the API's 400 with the registry's refusal
            self._error("image", [str(exc)])
        return cleaned

    def _volume_id(self, named: str) -> int | str:
        """A volume typed by its id or by a name only one volume the caller may mount has
        (else as typed: the mount's check names what it cannot find)."""
        if named.isdigit():
            return int(named)
        assert self.tenant is not None
        found = list(volumes_mountable(self.identity, self.tenant).filter(name=named)
                     .values_list("pk", flat=True)[:2])
        return found[0] if len(found) == 1 else named

    def _rule(self, field: str, values: dict[str, Any]) -> None:
        try:
            values[field] = field_clean(field, values[field])
        except LaunchInvalid as exc:
            self._error(field, exc.errors[field])

    def _error(self, field: str, messages: list[str]) -> None:
        if field in self.LISTS:
            self.list_errors.setdefault(field, []).extend(messages)
        else:
            self.add_error(field if field in self.fields else None, messages)

    def field_errors(self) -> dict[str, list[str]]:
        """{field: [message, …]}, the form's own errors under "form"."""
        errors: dict[str, list[str]] = {}
        for field, messages in self.errors.items():
            key = "form" if field == NON_FIELD_ERRORS else field
            errors.setdefault(key, []).extend(str(m) for m in messages)
        for field, problems in self.list_errors.items():
            errors.setdefault(field, []).extend(problems)
        return errors
