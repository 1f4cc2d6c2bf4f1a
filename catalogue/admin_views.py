"""The admin's catalogue pages, under /admin/ (admin_urls.py): GPU types with live capacity and
templates. (The image registries a tenant may use are a section of the tenant page, in
tenants/admin_views.py.)

Plain forms that work without JavaScript (POST, then redirect); htmx swaps a table row when an
admin enables or disables a type or template. The figures are the capacity view's
(cluster.capacity); when the cluster does not answer, the page says so in a banner and
still shows the catalogue.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from django.contrib import messages
from django.db import IntegrityError
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from catalogue.forms import GpuTypeForm, TemplateForm
from catalogue.models import GpuType, Template
from catalogue.selectors import capacity_outlook
from catalogue.services import (
    gpu_type_create,
    gpu_type_disable,
    gpu_type_enable,
    gpu_type_update,
    template_create,
    template_disable,
    template_enable,
    template_update,
)
from catalogue.sharing import (
    DRA,
    EXCLUSIVE,
    LABEL_PRODUCT,
    Sharing,
    kueue_device_class_mappings,
    node_layout,
    nodes_sharing,
)
from cluster.capacity import (
    GpuTypeCapacity,
    cluster_nodes,
    dra_devices,
    gpu_capacity,
    gpus_admitted_without_pods,
    node_matches,
)
from cluster.devices import DeviceRow
from identity.access import SignedInRequest, admin_required
from kube.client import KubeError
from kube.dra import dra_refusal
from kube.quantity import parse_quantity

log = logging.getLogger(__name__)

CLUSTER_UNREACHABLE = ("The cluster is unreachable right now: capacity is not shown. "
                       "The catalogue can still be edited.")
# node labels every node carries: not worth showing when pointing at unclaimed GPU nodes
_COMMON_LABEL_PREFIXES = ("kubernetes.io/", "node.kubernetes.io/", "beta.kubernetes.io/",
                          "node-role.kubernetes.io/", "topology.kubernetes.io/")


# --- GPU types: the catalogue against the cluster's nodes -------------------------------------

@dataclasses.dataclass
class GpuTypeRow:
    """One GPU type as the admin's table shows it; the numbers are None when not known."""

    gpu_type: GpuType
    nodes: int | None = None  # schedulable nodes that match and offer the resource
    allocatable: int | None = None
    held: int = 0  # GPUs held (the capacity view's; without the cluster: admitted workloads')
    largest_node: int | None = None
    problem: str = ""  # why no workload of this type can run, for the admin
    # how the nodes say its units share their GPUs, where that differs from the catalogue
    sharing_problem: str = ""
    # a shared type's nodes, each with how its GPUs are carved
    layout: tuple[str, ...] = ()
    outlook: str = ""  # the calendar's next 24 hours: "16 free now, 8 from 14:00 (maintenance)"

    @property
    def free(self) -> int | None:
        return None if self.allocatable is None else max(self.allocatable - self.held, 0)

    @property
    def selector(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.gpu_type.node_selector.items())


def _problem(gpu_type: GpuType, nodes: list[dict[str, Any]], offering: int) -> str:
    """Why this type has no usable node ("" when it has one)."""
    if not gpu_type.node_selector:
        return "No node labels: the portal cannot tell which nodes have this GPU."
    if offering:
        return ""
    selector = ", ".join(f"{k}={v}" for k, v in gpu_type.node_selector.items())
    matching = [n for n in nodes
                if node_matches(n["metadata"].get("labels") or {}, gpu_type.node_selector)]
    if not matching:
        return f"No node matches {selector}."
    if all(n.get("spec", {}).get("unschedulable") for n in matching):
        return f"Every node matching {selector} ({len(matching)}) is cordoned."
    return (f"{len(matching)} node{'s' if len(matching) != 1 else ''} match {selector}, but "
            f"none offers {gpu_type.resource_name}.")


def _offering(gpu_type: GpuType, nodes: list[dict[str, Any]]) -> list[dict[str, str]]:
    """The labels of the nodes that match the type and have its resource."""
    return [labels for node in nodes
            if gpu_type.node_selector
            and node_matches(labels := node["metadata"].get("labels") or {},
                             gpu_type.node_selector)
            and _amount(node, gpu_type.resource_name)]


def _amount(node: dict[str, Any], resource: str) -> int:
    return int(parse_quantity(((node.get("status") or {}).get("capacity") or {})
                              .get(resource, "0")))


def sharing_problem(gpu_type: GpuType, nodes: list[dict[str, Any]]) -> str:
    """Where the nodes' labels (catalogue/sharing.py) say otherwise than the catalogue about how
    the type's units share their GPUs ("" when they agree, or no node offers the type)."""
    reported = nodes_sharing(_offering(gpu_type, nodes), gpu_type.resource_name)
    if not reported:
        return ""
    if len(reported) > 1:
        return ("Its nodes disagree on how they share their GPUs: "
                + "; ".join(sorted(found.text for found in reported)) + ".")
    (found,) = reported
    said = Sharing(gpu_type.sharing, gpu_type.gpu_fraction, found.product)
    if (found.sharing, found.fraction) != (said.sharing, said.fraction):
        return f"The nodes report {found.text}; the catalogue says {said.text}."
    physical = gpu_type.physical
    if physical is not None and found.product:
        products = {labels.get(LABEL_PRODUCT, "") for labels in _offering(physical, nodes)}
        if products and found.product not in products:
            return (f"Carved from {physical.slug}, whose nodes have "
                    f"{', '.join(sorted(products))}, but its nodes' GPUs are {found.product}.")
    return ""


def dra_problem(capacity: GpuTypeCapacity) -> str:
    """Why a DRA type's claims can be given no device ("" when some device matches)."""
    if not capacity.installed:
        return ("No device the cluster's ResourceSlices publish matches its device class, "
                "product and memory.")
    if not capacity.nodes:
        return "Every node with matching devices is cordoned."
    return ""


def _dra_devices() -> dict[str, list[DeviceRow]]:
    try:
        return dra_devices()
    except KubeError:
        return {}  # the page's banner says the cluster is unreachable


def _cluster() -> tuple[list[dict[str, Any]] | None, dict[str, GpuTypeCapacity] | None,
                        str | None]:
    """The nodes and the capacity view, or the banner when the cluster does not answer."""
    try:
        return cluster_nodes(), gpu_capacity(), None
    except KubeError as exc:
        log.warning("cluster unreachable for the GPU types page: %s", exc)
        return None, None, CLUSTER_UNREACHABLE


def gpu_type_rows(gpu_types: list[GpuType], nodes: list[dict[str, Any]] | None,
                  capacity: dict[str, GpuTypeCapacity] | None) -> list[GpuTypeRow]:
    admitted = gpus_admitted_without_pods() if capacity is None else {}
    rows = []
    for gpu_type in gpu_types:
        cap = capacity.get(gpu_type.slug) if capacity is not None else None
        row = GpuTypeRow(gpu_type=gpu_type,
                         held=cap.held if cap is not None else admitted.get(gpu_type.slug, 0))
        if cap is not None and nodes is not None:
            row.nodes, row.allocatable, row.largest_node = cap.nodes, cap.allocatable, \
                cap.largest_node
            row.problem = _problem(gpu_type, nodes, cap.nodes)
            row.sharing_problem = sharing_problem(gpu_type, nodes)
            if gpu_type.sharing == DRA:
                # its devices are in ResourceSlices, not in the nodes' extended resources:
                # what matters is whether the cluster allocates claims, and has devices for it
                row.problem, row.sharing_problem = dra_refusal() or dra_problem(cap), ""
            if gpu_type.sharing != EXCLUSIVE:
                row.layout = tuple(sorted(
                    node_layout(node["metadata"]["name"], node["metadata"].get("labels") or {})
                    for node in nodes if _offering(gpu_type, [node])))
            outlook = capacity_outlook(gpu_type, free_now=cap.free)
            if outlook is not None and outlook["changes"]:
                row.outlook = outlook["text"]
        elif not gpu_type.node_selector:
            row.problem = _problem(gpu_type, [], 0)
        rows.append(row)
    return rows


def unclaimed_gpu_nodes(gpu_types: list[GpuType], nodes: list[dict[str, Any]]
                        ) -> list[dict[str, Any]]:
    """GPU nodes that no type of the catalogue places work on: a type may be missing."""
    result = []
    for node in nodes:
        labels = node["metadata"].get("labels") or {}
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        resources = {name: int(parse_quantity(amount)) for name, amount in allocatable.items()
                     if "gpu" in name or name.startswith("nvidia.com/")}
        resources = {name: amount for name, amount in resources.items() if amount}
        if not resources:
            continue
        if any(t.node_selector and node_matches(labels, t.node_selector)
               and t.resource_name in resources for t in gpu_types):
            continue
        result.append({
            "name": node["metadata"]["name"],
            "labels": ", ".join(f"{k}={v}" for k, v in sorted(labels.items())
                                if not k.startswith(_COMMON_LABEL_PREFIXES)),
            "resources": ", ".join(f"{amount} × {name}" for name, amount in resources.items()),
        })
    return result


@admin_required
def gpu_type_list(request: SignedInRequest) -> HttpResponse:
    gpu_types = list(GpuType.objects.select_related("physical"))
    nodes, capacity, cluster_error = _cluster()
    return render(request, "catalogue/gpu_type_list.html", {
        "rows": gpu_type_rows(gpu_types, nodes, capacity), "cluster_error": cluster_error,
        "unclaimed": unclaimed_gpu_nodes(gpu_types, nodes) if nodes is not None else [],
        "devices": sorted(_dra_devices().items()) if nodes is not None else [],
        # what Kueue's Configuration must map for the DRA types' quotas (read at its start)
        "kueue_mappings": kueue_device_class_mappings(
            t.claim_class for t in gpu_types if t.claim_class),
    })


@admin_required
@require_http_methods(["GET", "POST"])
def gpu_type_new(request: SignedInRequest) -> HttpResponse:
    form = GpuTypeForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            gpu_type = gpu_type_create(acting_user=request.user, slug=form.cleaned_data["slug"],
                                       **form.changes())
        except IntegrityError:
            if not GpuType.objects.filter(slug=form.cleaned_data["slug"]).exists():
                raise  # not the race below: an error of its own, not a name in use
            # created by someone else since the form was checked
            form.add_error("slug", f"A GPU type {form.cleaned_data['slug']} exists already.")
        else:
            messages.success(request, f"GPU type {gpu_type.slug} added. Tenants may use none "
                                      "of it until you raise their quota.")
            return redirect("catalogue:gpu-types")
    return _form_page(request, "catalogue/gpu_type_form.html", form)


@admin_required
@require_http_methods(["GET", "POST"])
def gpu_type_edit(request: SignedInRequest, pk: int) -> HttpResponse:
    gpu_type = get_object_or_404(GpuType, pk=pk)
    form = GpuTypeForm(request.POST or None, gpu_type=gpu_type)
    if request.method == "POST" and form.is_valid():
        gpu_type_update(gpu_type=gpu_type, acting_user=request.user, changes=form.changes())
        messages.success(request, f"GPU type {gpu_type.slug} saved.")
        return redirect("catalogue:gpu-types")
    return _form_page(request, "catalogue/gpu_type_form.html", form, gpu_type=gpu_type)


@admin_required
@require_POST
def gpu_type_enabled(request: SignedInRequest, pk: int) -> HttpResponse:
    """Enable (enabled=1) or disable a type; htmx gets the row back, a browser the page."""
    gpu_type = get_object_or_404(GpuType, pk=pk)
    enable = request.POST.get("enabled") == "1"
    change = gpu_type_enable if enable else gpu_type_disable
    gpu_type = change(gpu_type=gpu_type, acting_user=request.user)
    if not request.htmx:
        messages.success(request, f"GPU type {gpu_type.slug} "
                                  f"{'enabled' if enable else 'disabled'}.")
        return redirect("catalogue:gpu-types")
    nodes, capacity, _ = _cluster()
    row = gpu_type_rows([gpu_type], nodes, capacity)[0]
    return render(request, "catalogue/_gpu_type_row.html", {"row": row})


# --- templates ------------------------------------------------------------------------------

@admin_required
def template_list(request: SignedInRequest) -> HttpResponse:
    return render(request, "catalogue/template_list.html", {
        "templates": Template.objects.all()})


@admin_required
@require_http_methods(["GET", "POST"])
def template_new(request: SignedInRequest) -> HttpResponse:
    form = TemplateForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            template = template_create(acting_user=request.user, slug=form.cleaned_data["slug"],
                                       custom=form.cleaned_data["custom"],
                                       values=form.changes())
        except IntegrityError:
            if not Template.objects.filter(slug=form.cleaned_data["slug"]).exists():
                raise  # not the race below: an error of its own, not a name in use
            # created by someone else since the form was checked
            form.add_error("slug", f"A template {form.cleaned_data['slug']} exists already.")
        else:
            messages.success(request, f"Template {template.slug} added.")
            return redirect("catalogue:templates")
    return _form_page(request, "catalogue/template_form.html", form)


@admin_required
@require_http_methods(["GET", "POST"])
def template_edit(request: SignedInRequest, pk: int) -> HttpResponse:
    template = get_object_or_404(Template, pk=pk)
    form = TemplateForm(request.POST or None, template=template)
    if request.method == "POST" and form.is_valid():
        template_update(template=template, acting_user=request.user, changes=form.changes())
        messages.success(request, f"Template {template.slug} saved; launches from now on use "
                                  "it.")
        return redirect("catalogue:templates")
    return _form_page(request, "catalogue/template_form.html", form, template=template)


@admin_required
@require_POST
def template_enabled(request: SignedInRequest, pk: int) -> HttpResponse:
    template = get_object_or_404(Template, pk=pk)
    enable = request.POST.get("enabled") == "1"
    change = template_enable if enable else template_disable
    template = change(template=template, acting_user=request.user)
    if not request.htmx:
        messages.success(request, f"Template {template.slug} "
                                  f"{'enabled' if enable else 'disabled'}.")
        return redirect("catalogue:templates")
    return render(request, "catalogue/_template_row.html", {"template": template})


def _form_page(request: SignedInRequest, page: str, form: GpuTypeForm | TemplateForm,
               **context: object) -> HttpResponse:
    status = 400 if form.is_bound and form.errors else 200
    return render(request, page, {"form": form, **context}, status=status)
