"""Writes of the catalogue: GPU types, templates, and the image registries a tenant may use.

Each function takes validated values (the admin pages' forms validate input), changes one row
inside a transaction, and writes an audit record with the row before and after. Functions that
would break an invariant the rest of the portal relies on refuse with `CatalogueRefused`:
a template's slug never changes (the seeded `jupyter`, `digits`, `tensorboard`, `custom` are
part of the contract), nor does its `custom` flag, nor a GPU type's slug (quotas and the API
name types by slug).
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any, TypeVar

from django.db import transaction

from audit.services import Actor, audit_record
from catalogue.models import GpuType, Template
from catalogue.options import allowed_options_problems
from catalogue.sharing import (
    DNS_LABEL,
    DRA,
    DRA_DEVICE_TYPES,
    DRA_GPU_CLASS,
    DRA_PRODUCT,
    EXCLUSIVE,
    fraction_text,
)
from core.tasks import send_on_commit

GPU_TYPE_FIELDS = ("name", "resource_name", "node_selector", "memory_gb", "enabled",
                   "sharing", "device_class", "product", "gpu_fraction", "physical")
TEMPLATE_FIELDS = ("name", "description", "kind", "image", "image_replaceable", "command",
                   "args", "allowed_args", "env", "port",
                   "default_cpu", "default_memory_gb", "allow_root", "run_as_user",
                   "enabled")
# fixed once created: other records, the API and the demo contract name rows by them
GPU_TYPE_FIXED = ("slug",)
TEMPLATE_FIXED = ("slug", "custom")


_Row = TypeVar("_Row", GpuType, Template)


class CatalogueRefused(ValueError):
    """A change the catalogue does not allow (e.g. renaming a seeded template)."""


def gpu_type_snapshot(gpu_type: GpuType) -> dict[str, Any]:
    return {"slug": gpu_type.slug,
            **{field: getattr(gpu_type, field) for field in GPU_TYPE_FIELDS[:-2]},
            "gpu_fraction": fraction_text(gpu_type.gpu_fraction),
            "physical": gpu_type.physical_slug}


def _gpu_type_set(gpu_type: GpuType, field: str, value: Any) -> list[str]:
    """Set one field of a GPU type as the services take it (gpu_fraction a Fraction, physical a
    GpuType or None); the columns it changes."""
    if field == "gpu_fraction":
        gpu_type.fraction_numerator = value.numerator
        gpu_type.fraction_denominator = value.denominator
        return ["fraction_numerator", "fraction_denominator"]
    setattr(gpu_type, field, value)
    return [field]


def _gpu_type_check(gpu_type: GpuType) -> None:
    """A type's sharing, fraction and physical type agree: an exclusive type is a whole GPU of
    its own; a shared one is a part of one, carved from an exclusive type; a DRA type names
    one of the driver's device classes (a whole GPU in gpu.nvidia.com, a part of one in
    mig.nvidia.com) and a product its selector can hold, and no other type names either."""
    fraction = gpu_type.gpu_fraction
    if gpu_type.sharing != DRA:
        if gpu_type.device_class or gpu_type.product:
            raise CatalogueRefused("Only a DRA type names a device class and a product.")
    else:
        if gpu_type.device_class not in DRA_DEVICE_TYPES:
            raise CatalogueRefused("A DRA type names its device class: "
                                   f"{' or '.join(DRA_DEVICE_TYPES)}.")
        if not DNS_LABEL.match(gpu_type.slug):
            raise CatalogueRefused("A DRA type's slug names its DeviceClass: lower-case letters, "
                                   "digits and dashes, starting and ending with a letter or digit.")
        if gpu_type.product and not DRA_PRODUCT.match(gpu_type.product):
            raise CatalogueRefused("Give the product as the driver publishes it, e.g. "
                                   "NVIDIA A100-SXM4-80GB (letters, digits, spaces, . _ - ( ) / +).")
        if (fraction == 1) != (gpu_type.device_class == DRA_GPU_CLASS):
            raise CatalogueRefused(f"A device of {DRA_GPU_CLASS} is a whole GPU (fraction 1); "
                                   "a MIG instance a part of one.")
        if fraction == 1:
            if gpu_type.physical_id is not None:
                raise CatalogueRefused("A whole GPU claimed through DRA is a GPU of its own: "
                                       "no physical type.")
            return
    if gpu_type.sharing == EXCLUSIVE:
        if fraction != 1 or gpu_type.physical_id is not None:
            raise CatalogueRefused("An exclusive GPU type is a whole GPU: fraction 1, no "
                                   "physical type.")
        return
    if not 0 < fraction < 1:
        raise CatalogueRefused(f"A {gpu_type.sharing} unit is a part of a GPU: give a fraction "
                               "below 1, e.g. 1/4 or 1/7.")
    physical = gpu_type.physical
    if physical is not None and (physical.sharing != EXCLUSIVE or physical.pk == gpu_type.pk):
        raise CatalogueRefused(f"{physical.slug} is not a whole GPU: a shared type is carved "
                               "from an exclusive one.")


def template_snapshot(template: Template) -> dict[str, Any]:
    return {"slug": template.slug, "custom": template.custom,
            **{field: getattr(template, field) for field in TEMPLATE_FIELDS}}


def _check_changes(changes: dict[str, Any], allowed: tuple[str, ...], fixed: tuple[str, ...],
                   current: GpuType | Template) -> None:
    for field in changes:
        if field in fixed and changes[field] != getattr(current, field):
            raise CatalogueRefused(f"The {field} of {current.slug} cannot change.")
        if field not in allowed and field not in fixed:
            raise CatalogueRefused(f"Unknown field {field!r}.")


# --- GPU types ------------------------------------------------------------------------------

@transaction.atomic
def gpu_type_create(*, acting_user: Actor, slug: str, name: str, resource_name: str,
                    node_selector: dict[str, str], memory_gb: int,
                    enabled: bool = True, sharing: str = EXCLUSIVE,
                    gpu_fraction: Fraction = Fraction(1),
                    physical: GpuType | None = None, device_class: str = "",
                    product: str = "") -> GpuType:
    """A new GPU type. Tenants may use none of it until an admin raises their quota."""
    gpu_type = GpuType(slug=slug, name=name, resource_name=resource_name,
                       node_selector=node_selector, memory_gb=memory_gb, enabled=enabled,
                       sharing=sharing, physical=physical, device_class=device_class,
                       product=product)
    _gpu_type_set(gpu_type, "gpu_fraction", gpu_fraction)
    _gpu_type_check(gpu_type)
    gpu_type.save()
    audit_record(actor=acting_user, action="gpu_type.create", target=f"gpu_type/{slug}",
                 after=gpu_type_snapshot(gpu_type))
    _device_classes_follow(gpu_type.sharing)
    return gpu_type


def _device_classes_follow(*sharings: str) -> None:
    """A DRA type made, changed or no longer one: its DeviceClass on each cluster follows at
    once (the tenants' reconcile makes, changes and removes the types' own classes) rather
    than at the next periodic sweep."""
    if DRA in sharings:
        send_on_commit("tenants.tasks.tenants_reconcile_all")


def _template_check(template: Template) -> None:
    """The options a template lets launches add, by the one rule (catalogue/options.py)."""
    problems = allowed_options_problems(list(template.allowed_args or []),
                                        command=template.command, args=template.args,
                                        custom=template.custom)
    if problems:
        raise CatalogueRefused(" ".join(problems))


def _audited_change(obj: _Row, acting_user: Actor, changes: dict[str, Any], action: str, *,
                    kind: str, allowed: tuple[str, ...], fixed: tuple[str, ...],
                    snapshot: Callable[[_Row], dict[str, Any]],
                    check: Callable[[_Row], None] | None = None,
                    assign: Callable[[_Row, str, Any], list[str]] | None = None) -> _Row:
    """Apply `changes` to a locked GPU type or template (`assign`: how a field is set, and the
    columns that changes; else the attribute of its name); `check` refuses the result
    (CatalogueRefused); save and audit only when it changed."""
    _check_changes(changes, allowed, fixed, obj)
    with transaction.atomic():
        obj = type(obj).objects.select_for_update().get(pk=obj.pk)
        before = snapshot(obj)
        columns: list[str] = []
        for field, value in changes.items():
            if field in fixed:
                continue
            if assign is not None:
                columns += assign(obj, field, value)
            else:
                setattr(obj, field, value)
                columns.append(field)
        if check is not None:
            check(obj)
        after = snapshot(obj)
        if after != before:
            obj.save(update_fields=columns)
            audit_record(actor=acting_user, action=action,
                         target=f"{kind}/{obj.slug}",
                         before=before, after=after)
    return obj


def _gpu_type_change(gpu_type: GpuType, acting_user: Actor, changes: dict[str, Any],
                     action: str) -> GpuType:
    before = gpu_type_snapshot(gpu_type)
    changed = _audited_change(gpu_type, acting_user, changes, action, kind="gpu_type",
                              allowed=GPU_TYPE_FIELDS, fixed=GPU_TYPE_FIXED,
                              snapshot=gpu_type_snapshot, check=_gpu_type_check,
                              assign=_gpu_type_set)
    if gpu_type_snapshot(changed) != before:
        _device_classes_follow(before["sharing"], changed.sharing)
    return changed


def gpu_type_update(*, gpu_type: GpuType, acting_user: Actor, changes: dict[str, Any]) -> GpuType:
    """Change a GPU type. Running workloads keep their placement; new launches use the change."""
    return _gpu_type_change(gpu_type, acting_user, changes, "gpu_type.update")


def gpu_type_enable(*, gpu_type: GpuType, acting_user: Actor) -> GpuType:
    return _gpu_type_change(gpu_type, acting_user, {"enabled": True}, "gpu_type.enable")


def gpu_type_disable(*, gpu_type: GpuType, acting_user: Actor) -> GpuType:
    """No new launches of this type; what runs keeps running."""
    return _gpu_type_change(gpu_type, acting_user, {"enabled": False}, "gpu_type.disable")


# --- templates ------------------------------------------------------------------------------

@transaction.atomic
def template_create(*, acting_user: Actor, slug: str, custom: bool = False,
                    values: dict[str, Any]) -> Template:
    """A new template; `values` holds fields of TEMPLATE_FIELDS (the rest keep their defaults)."""
    _check_changes(values, TEMPLATE_FIELDS, (), Template(slug=slug))
    template = Template(slug=slug, custom=custom, **values)
    _template_check(template)
    template.save()
    audit_record(actor=acting_user, action="template.create", target=f"template/{slug}",
                 after=template_snapshot(template))
    return template


def _template_change(template: Template, acting_user: Actor, changes: dict[str, Any],
                     action: str) -> Template:
    return _audited_change(template, acting_user, changes, action, kind="template",
                           allowed=TEMPLATE_FIELDS, fixed=TEMPLATE_FIXED,
                           snapshot=template_snapshot, check=_template_check)


def template_update(*, template: Template, acting_user: Actor, changes: dict[str, Any]) -> Template:
    """Change a template. Launches from now on use it; running workloads are not touched."""
    return _template_change(template, acting_user, changes, "template.update")


def template_enable(*, template: Template, acting_user: Actor) -> Template:
    return _template_change(template, acting_user, {"enabled": True}, "template.enable")


def template_disable(*, template: Template, acting_user: Actor) -> Template:
    """No new launches from this template; what runs keeps running."""
    return _template_change(template, acting_user, {"enabled": False}, "template.disable")
