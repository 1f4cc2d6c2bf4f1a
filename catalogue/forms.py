"""The admin's catalogue forms: GPU types, templates, a tenant's image registries.

They read what the admin typed (node labels and environment variables as KEY=value lines, a
command one argv item per line) and validate it; the writes are `catalogue` services. Each
field's error and hint are tied to its input (`aria-describedby`, `aria-invalid`) so that a
screen reader announces them with the field.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

from django import forms
from django.conf import settings

from catalogue.environment import env_problems, env_template_problems
from catalogue.fields import (
    MAX_ARG_LENGTH,
    MAX_ARGV_ITEMS,
    argv_lines,
    env_lines,
    invisible_characters_refusal,
)
from catalogue.images import image_allowed, validate_image_reference
from catalogue.models import DEVICE_CLASS_CHOICES, RESOURCE_NAME, SHARING_CHOICES, GpuType, Template
from catalogue.options import allowed_options_problems
from catalogue.sharing import (
    DRA,
    DRA_GPU_CLASS,
    DRA_PRODUCT,
    EXCLUSIVE,
    fraction_text,
    parse_fraction,
)
from core.validation import WholeNumberFormField, excerpt

# Kubernetes label syntax: key = [DNS-1123 subdomain "/"] name; value = "" or name
_LABEL_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?", re.ASCII)
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*",
                            re.ASCII)
# slugs name types and templates in quotas, the API and form field names: keep them plain
SLUG = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", re.ASCII)


def label_key_error(key: str) -> str | None:
    """Why `key` is not a Kubernetes label key, or None."""
    prefix, slash, name = key.rpartition("/")
    if slash:
        if not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.fullmatch(prefix):
            return (f"{excerpt(key)}: the prefix before “/” must be a DNS subdomain such as "
                    "example.com (lower-case).")
    if not name or len(name) > 63 or not _LABEL_NAME.fullmatch(name):
        return (f"{excerpt(key)} is not a label key: at most 63 letters, digits, “-”, “_” or “.”, "
                "starting and ending with a letter or digit (optionally after prefix/).")
    return None


def label_value_error(key: str, value: str) -> str | None:
    if value and (len(value) > 63 or not _LABEL_NAME.fullmatch(value)):
        return (f"{excerpt(value)} (for {excerpt(key, quotes=False)}) is not a label value: "
                "at most 63 letters, digits, “-”, “_” or “.”, starting and ending with a letter "
                "or digit.")
    return None


def node_selector_lines(text: str) -> tuple[dict[str, str], list[str]]:
    """`key=value` lines → (selector, errors)."""
    selector: dict[str, str] = {}
    errors: list[str] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        key, sep, value = line.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key:
            errors.append(f"Line {number} is not key=value.")
        elif key in selector:
            errors.append(f"Line {number} gives {key} a second time.")
        else:
            problem = label_key_error(key) or label_value_error(key, value)
            if problem:
                errors.append(f"Line {number}: {problem}")
            else:
                selector[key] = value
    return selector, errors


def selector_text(selector: dict[str, str]) -> str:
    return "\n".join(f"{key}={value}" for key, value in selector.items())


def argv_text(argv: list[str]) -> str:
    return "\n".join(argv)


def env_text(env: dict[str, str]) -> str:
    return "\n".join(f"{key}={value}" for key, value in env.items())


class AccessibleForm(forms.Form):
    """Hints and errors announced with their field: `hint-<name>`, `err-<name>`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:  # forms.Form's
        super().__init__(*args, **kwargs)
        for name, field in self.fields.items():
            if field.help_text:
                field.widget.attrs["aria-describedby"] = f"hint-{name}"

    def full_clean(self) -> None:
        super().full_clean()
        for name in self.errors:
            if name not in self.fields:
                continue
            attrs = self.fields[name].widget.attrs
            attrs["aria-describedby"] = " ".join(
                filter(None, [attrs.get("aria-describedby"), f"err-{name}"]))
            attrs["aria-invalid"] = "true"

    def error_summary(self) -> list[dict[str, str]]:
        """Field errors in form order, for the summary at the top that links to each field."""
        return [{"field": name, "label": str(self.fields[name].label), "message": str(message)}
                for name in self.fields for message in self.errors.get(name, [])]


def visible_text(value: str, what: str) -> str:
    """`value`, unless it holds an invisible character (the names' rule, naming.py)."""
    refusal = invisible_characters_refusal(value, what)
    if refusal:
        raise forms.ValidationError(refusal)
    return value


def _lines_field(label: str, help_text: str, rows: int = 3) -> forms.CharField:
    return forms.CharField(label=label, required=False, help_text=help_text, strip=False,
                           widget=forms.Textarea(attrs={"rows": rows, "spellcheck": "false"}))


# --- GPU types ------------------------------------------------------------------------------

class GpuTypeForm(AccessibleForm):
    slug = forms.CharField(
        max_length=40, help_text="Lower-case letters, digits and dashes, e.g. a100. Quotas and "
                                 "the API name the type by it; it cannot change later.")
    name = forms.CharField(max_length=120, label="Display name",
                           help_text="What researchers see, e.g. NVIDIA A100 80GB.")
    resource_name = forms.CharField(
        max_length=120, initial="nvidia.com/gpu", label="Resource name",
        validators=[RESOURCE_NAME],
        help_text="The extended resource the nodes offer: nvidia.com/gpu, or a MIG profile "
                  "such as nvidia.com/mig-1g.10gb.")
    node_selector = _lines_field(
        "Node labels", "One key=value per line; a node must carry all of them, e.g. "
                       "gputype=a100.")
    memory_gb = WholeNumberFormField(min_value=0, max_value=4096, initial=0,
                                   label="GPU memory (GB)")
    enabled = forms.BooleanField(required=False, initial=True, label="Enabled",
                                 help_text="Disabled types cannot be launched; running "
                                           "workloads keep running.")
    sharing = forms.ChoiceField(
        choices=SHARING_CHOICES, initial=EXCLUSIVE, required=False,
        label="Sharing",
        help_text="How one unit shares its GPU: the list of types shows what the nodes' labels "
                  "say and flags a difference.")
    gpu_fraction = forms.CharField(
        max_length=16, initial="1", required=False, label="Part of a GPU per unit",
        help_text="1 for a whole GPU; 1/4 for a GPU time-sliced four ways; 1/7 for a MIG "
                  "1g.10gb slice of an A100. Quotas count units; totals, budgets and GPU-hours "
                  "count units × this.")
    device_class = forms.ChoiceField(
        choices=DEVICE_CLASS_CHOICES, required=False, label="Device class (DRA)",
        help_text="A DRA type's claims ask NVIDIA's DRA driver for a device of this class; "
                  "blank for every other sharing.")
    product = forms.CharField(
        max_length=80, required=False, label="Product (DRA)",
        help_text="The board's name as the DRA driver publishes it (NVML's), e.g. NVIDIA "
                  "A100-SXM4-80GB; blank: any. Claims also ask at least the GPU memory above.")
    physical = forms.ModelChoiceField(
        queryset=GpuType.objects.filter(sharing=EXCLUSIVE), required=False,
        to_field_name="slug", label="Carved from",
        help_text="The whole-GPU type whose GPUs a shared type's units are parts of.")

    def __init__(self, *args: Any, gpu_type: GpuType | None = None, **kwargs: Any) -> None:
        self.gpu_type = gpu_type
        if gpu_type is not None:
            kwargs.setdefault("initial", {
                "slug": gpu_type.slug, "name": gpu_type.name,
                "resource_name": gpu_type.resource_name,
                "node_selector": selector_text(gpu_type.node_selector),
                "memory_gb": gpu_type.memory_gb, "enabled": gpu_type.enabled,
                "sharing": gpu_type.sharing,
                "device_class": gpu_type.device_class, "product": gpu_type.product,
                "gpu_fraction": fraction_text(gpu_type.gpu_fraction),
                "physical": gpu_type.physical_slug})
        super().__init__(*args, **kwargs)
        self.fields["node_selector"].widget.attrs["placeholder"] = "gputype=a100"
        if gpu_type is not None:
            self.fields["slug"].disabled = True
            self.fields["slug"].help_text = "Fixed: quotas and the API name the type by it."

    def clean_slug(self) -> str:
        slug: str = self.cleaned_data["slug"].strip()
        if self.gpu_type is not None:
            return self.gpu_type.slug
        if not SLUG.fullmatch(slug):
            raise forms.ValidationError(
                "Use lower-case letters, digits and dashes, starting and ending with a letter "
                "or digit.")
        if GpuType.objects.filter(slug=slug).exists():
            raise forms.ValidationError(f"A GPU type {slug} exists already.")
        return slug

    def clean_name(self) -> str:
        return visible_text(self.cleaned_data["name"], "The name")

    def clean_node_selector(self) -> dict[str, str]:
        selector, errors = node_selector_lines(self.cleaned_data["node_selector"])
        if errors:
            raise forms.ValidationError(errors)
        if not selector:
            raise forms.ValidationError(
                "Give at least one node label (key=value): it is how the portal finds this "
                "type's nodes and places its workloads.")
        return selector

    def clean_sharing(self) -> str:
        return str(self.cleaned_data.get("sharing") or EXCLUSIVE)

    def clean_gpu_fraction(self) -> Fraction:
        try:
            return parse_fraction(self.cleaned_data.get("gpu_fraction") or "1")
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from exc

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        sharing, fraction = data.get("sharing"), data.get("gpu_fraction")
        if sharing == EXCLUSIVE and fraction is not None and fraction != 1:
            self.add_error("gpu_fraction", "An exclusive type is a whole GPU: give 1, or "
                                           "choose how it shares.")
        if sharing not in (None, EXCLUSIVE, DRA) and fraction == 1:
            self.add_error("gpu_fraction", "A shared unit is a part of a GPU: e.g. 1/4 or 1/7.")
        if sharing == EXCLUSIVE and data.get("physical") is not None:
            self.add_error("physical", "An exclusive type is a GPU of its own.")
        self._clean_dra(data)
        return data

    def _clean_dra(self, data: dict[str, Any]) -> None:
        """A DRA type's device class and product (the service's rule, with the field named)."""
        device_class, product = data.get("device_class") or "", data.get("product") or ""
        if data.get("sharing") != DRA:
            if device_class or product:
                self.add_error("device_class", "Only a DRA type names a device class and a "
                                               "product.")
            return
        if not device_class:
            self.add_error("device_class", "A DRA type names the device class its claims ask.")
        elif (data.get("gpu_fraction") == 1) != (device_class == DRA_GPU_CLASS):
            self.add_error("gpu_fraction", f"A device of {DRA_GPU_CLASS} is a whole GPU (1); "
                                           "a MIG instance a part of one (e.g. 1/7).")
        if product and not DRA_PRODUCT.match(product):
            self.add_error("product", "Give the product as the driver publishes it, e.g. NVIDIA "
                                      "A100-SXM4-80GB (letters, digits, spaces, . _ - ( ) / +).")

    def changes(self) -> dict[str, Any]:
        data = self.cleaned_data
        return {field: data[field] for field in
                ("name", "resource_name", "node_selector", "memory_gb", "enabled", "sharing",
                 "device_class", "product", "gpu_fraction", "physical")}


# --- templates ------------------------------------------------------------------------------

class TemplateForm(AccessibleForm):
    slug = forms.CharField(
        max_length=40, help_text="Lower-case letters, digits and dashes; it cannot change later.")
    custom = forms.BooleanField(
        required=False, label="Custom image",
        help_text="Researchers give their own image, command and port; fixed once created.")
    name = forms.CharField(max_length=120, label="Name")
    description = forms.CharField(required=False, label="Description",
                                  widget=forms.Textarea(attrs={"rows": 2}),
                                  help_text="Shown under the template on the launch page.")
    kind = forms.ChoiceField(choices=Template.Kind.choices, label="Kind")
    image = forms.CharField(
        max_length=512, required=False, label="Image",
        help_text="A registry reference such as nvcr.io/nvidia/pytorch:24.01-py3.")
    image_replaceable = forms.BooleanField(
        required=False, label="Researchers may choose another image",
        help_text="In place of the template's image, one from the allowed registries (the "
                  "site's and the project's); the command, port, user and login stay the "
                  "template's. Unticked: the template's image only.")
    command = _lines_field("Command", "One argv item per line (never run through a shell); "
                                      "empty: the image's entrypoint.")
    args = _lines_field("Arguments", "One argument per line.")
    allowed_args = _lines_field(
        "Options researchers may add",
        "One option name per line, such as --logdir: a launch may append NAME or NAME=value "
        "for these to the arguments above, nothing else. Empty: launches add nothing. Options "
        "that choose the port, address or login (--port, --ip, --token …) are never allowed.")
    env = _lines_field("Environment", "KEY=value, one per line.")
    port = WholeNumberFormField(min_value=1, max_value=65535, required=False, label="Port",
                              help_text="The port a service listens on.")
    default_cpu = WholeNumberFormField(min_value=1, max_value=256, label="Default CPU cores")
    default_memory_gb = WholeNumberFormField(min_value=1, max_value=4096,
                                           label="Default memory (GiB)")
    allow_root = forms.BooleanField(
        required=False, label="May run as root",
        help_text="Unticked: the container runs as a non-root user (Kubernetes refuses to start "
                  "it as root), as Pod Security “restricted” requires. Ticked: it runs as the "
                  "image's user, root included, and only in projects an admin lets run root "
                  "(their namespace enforces “baseline”).")
    run_as_user = WholeNumberFormField(min_value=0, max_value=2**31 - 1, required=False,
                                     label="Run as user id", help_text="Empty: the image's user.")
    enabled = forms.BooleanField(required=False, initial=True, label="Enabled",
                                 help_text="Disabled templates cannot be launched.")

    def __init__(self, *args: Any, template: Template | None = None, **kwargs: Any) -> None:
        self.template = template
        if template is not None:
            kwargs.setdefault("initial", {
                "slug": template.slug, "custom": template.custom, "name": template.name,
                "description": template.description, "kind": template.kind,
                "image": template.image, "image_replaceable": template.image_replaceable,
                "command": argv_text(template.command),
                "args": argv_text(template.args),
                "allowed_args": argv_text(template.allowed_args), "env": env_text(template.env),
                "port": template.port, "default_cpu": template.default_cpu,
                "default_memory_gb": template.default_memory_gb,
                "allow_root": template.allow_root,
                "run_as_user": template.run_as_user, "enabled": template.enabled})
        else:
            kwargs.setdefault("initial", {"default_cpu": 4, "default_memory_gb": 16,
                                          "allow_root": False, "kind": "service"})
        super().__init__(*args, **kwargs)
        if template is not None:
            self.fields["slug"].disabled = True
            self.fields["slug"].help_text = "Fixed: launches and scripts name the template by it."
            self.fields["custom"].disabled = True
            self.fields["custom"].help_text = "Fixed once created."
            if template.custom:
                self.fields["kind"].help_text = "The kind the launch form proposes; " \
                                                "researchers may choose the other."
                self.fields["image"].help_text = "Not used: researchers give their own image."
                self.fields["image_replaceable"].disabled = True
                self.fields["image_replaceable"].help_text = "Always: researchers give their " \
                                                             "own image."
                self.fields["allowed_args"].disabled = True
                self.fields["allowed_args"].help_text = "Any: researchers give their own " \
                                                        "command and arguments."

    @property
    def is_custom(self) -> bool:
        if self.template is not None:
            return self.template.custom
        return bool(self.cleaned_data.get("custom")) if hasattr(self, "cleaned_data") else False

    def clean_slug(self) -> str:
        if self.template is not None:
            return self.template.slug
        slug: str = self.cleaned_data["slug"].strip()
        if not SLUG.fullmatch(slug):
            raise forms.ValidationError(
                "Use lower-case letters, digits and dashes, starting and ending with a letter "
                "or digit.")
        if Template.objects.filter(slug=slug).exists():
            raise forms.ValidationError(f"A template {slug} exists already.")
        return slug

    def clean_name(self) -> str:
        return visible_text(self.cleaned_data["name"], "The name")

    def clean_description(self) -> str:
        return visible_text(self.cleaned_data["description"], "The description")

    def clean_image(self) -> str:
        image = self.cleaned_data["image"].strip()
        if not image:
            return ""
        try:
            image = validate_image_reference(image)
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from exc
        site = settings.PORTAL_IMAGE_REGISTRIES
        if not image_allowed(image, site):
            # every launch of it would be refused: say so now
            raise forms.ValidationError("Outside the site's registries (PORTAL_IMAGE_REGISTRIES:"
                                        f" {', '.join(site)}): no launch could run it.")
        return image

    def _argv(self, field: str) -> list[str]:
        argv = argv_lines(self.cleaned_data[field])
        if len(argv) > MAX_ARGV_ITEMS:
            raise forms.ValidationError(f"At most {MAX_ARGV_ITEMS} lines.")
        for number, item in enumerate(argv, start=1):
            if len(item) > MAX_ARG_LENGTH:
                raise forms.ValidationError(f"Line {number} is longer than {MAX_ARG_LENGTH} "
                                            "characters.")
            if "\x00" in item:
                raise forms.ValidationError(f"Line {number} holds a NUL character.")
        return argv

    def clean_command(self) -> list[str]:
        return self._argv("command")

    def clean_args(self) -> list[str]:
        return self._argv("args")

    def clean_allowed_args(self) -> list[str]:
        return [line.strip() for line in argv_lines(self.cleaned_data["allowed_args"])
                if line.strip()]

    def clean_env(self) -> dict[str, str]:
        env, errors = env_lines(self.cleaned_data["env"])
        # the rule researchers' launches follow (catalogue/environment.py), less the
        # loader's variables, which an admin may set on a template
        token_env = self.template.token_env if self.template is not None else ""
        errors += env_problems(env) + env_template_problems(env, token_env=token_env)
        if errors:
            raise forms.ValidationError(errors)
        return env

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        if not self.is_custom:
            if "image" in data and not data["image"] and "image" not in self.errors:
                self.add_error("image", "A template needs an image (only a custom template "
                                        "takes the researcher's).")
            if data.get("kind") == Template.Kind.SERVICE and data.get("port") is None \
                    and "port" not in self.errors:
                self.add_error("port", "A service needs the port it listens on.")
        if data.get("allowed_args") and "command" in data and "args" in data:
            problems = allowed_options_problems(
                data["allowed_args"], command=data["command"], args=data["args"],
                custom=self.is_custom)
            if problems:
                self.add_error("allowed_args", problems)
        if not data.get("allow_root") and data.get("run_as_user") == 0:
            self.add_error("run_as_user", "User 0 is root: tick “May run as root” or give "
                                          "another user id.")
        return data

    def changes(self) -> dict[str, Any]:
        data = self.cleaned_data
        changes = {field: data[field] for field in
                   ("name", "description", "kind", "image", "image_replaceable", "command",
                    "args", "allowed_args", "env", "port", "default_cpu", "default_memory_gb",
                    "allow_root", "run_as_user", "enabled")}
        if changes["kind"] == Template.Kind.BATCH and not self.is_custom:
            changes["port"] = None  # a Job has no Service: a port would only mislead
        return changes
