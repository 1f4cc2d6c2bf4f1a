"""The researcher's workload pages: launch, the project's list, one workload.

Server-rendered and usable without JavaScript; htmx adds the live parts (the launch page's fit
check and template fields, the list's and the workload page's status polling). Every workload
query starts from `Workload.objects.restrict` (the list) or `scoped_object` (one workload), so
another tenant's workload is a 404; the current project's tenant is `request.tenant`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import secrets
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.http import HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from access.services import tenant_service_access
from catalogue.models import Template
from clusters.selectors import clusters_visible
from core.redirects import safe_redirect_target
from core.validation import Refused, whole_number
from credentials.selectors import secrets_usable
from identity.access import project_required, scoped_object, tenant_required
from identity.models import User
from identity.scoping import Action, TenantScopedQuerySet
from kube.client import KubeError
from kube.engines import engine_refusal
from kube.kueue import queueing_shown
from storage.selectors import datasets_mountable
from tenants.middleware import ProjectRequest, TenantRequest
from tenants.models import Quota, Tenant
from tenants.selectors import tenant_admits_root
from workloads.queue import annotate_queue

from . import selectors
from .access import access_decision, workload_access_summary
from .advice import launch_advice, launch_context
from .filtersets import WorkloadFilterSet
from .forms import FIELD_LABELS, LaunchForm, launch_request
from .launch_spec import launch_checkpoint, launch_secrets
from .logs import redact, workload_logs, workload_redact
from .models import Workload
from .querysets import WorkloadQuerySet
from .selectors import (
    GpuAvailability,
    TenantGpuReads,
    annotate_clusters,
    service_addresses,
    tenant_gpu_reads,
    workload_may_change,
    workload_may_see_secrets,
)
from .services import (
    AdmissionRefused,
    workload_delete,
    workload_launch,
    workload_stop,
)
from .validation import ssh_by_default

log = logging.getLogger(__name__)

CLUSTER_UNREACHABLE = "The cluster is unreachable right now"
POLL_SECONDS = 3
LOG_TAIL = 100
EVENTS_SHOWN = 50
PAGE_SIZE = 50
CHECK_NUMBER_MAX = 1_000_000


def _project_workloads(request: ProjectRequest) -> QuerySet[Workload]:
    """The current project's workloads (admins too see only the current project's here)."""
    return Workload.objects.with_relations().restrict(request.identity, Action.VIEW).filter(
        tenant=request.tenant)


# --- GPUs: free in the cluster, left in the quota -----------------------------------------

@dataclasses.dataclass(frozen=True)
class Availability:
    """The launch page's GPU figures: what it read once (the live check's advisors read it
    too), its rows per type, the banner when the cluster did not answer."""

    reads: TenantGpuReads
    rows: list[GpuAvailability]
    cluster_error: str | None


def gpu_availability(tenant: Tenant, quota: Quota) -> Availability:
    """The selector's rows, with the banner the pages show when the cluster did not answer."""
    reads = tenant_gpu_reads(tenant, quota)
    rows, error = selectors.gpu_availability(tenant, quota, reads=reads)
    if error is None:
        return Availability(reads, rows, None)
    log.warning("cluster unreachable for the GPU availability: %s", error)
    return Availability(reads, rows, (
        f"{CLUSTER_UNREACHABLE}: free GPUs are not known. You can still launch; the workload "
        "starts when the cluster answers."))


def _whole_number(text: str | None) -> int | None:
    """A live check's count, nodes or minutes: ASCII digits, bounded far above any quota (a
    runtime of 10**30 minutes would overflow the budget advisor's arithmetic)."""
    try:
        return whole_number(text or "", low=0, high=CHECK_NUMBER_MAX)
    except Refused:
        return None


def _check_context(availability: Availability, values: Mapping[str, str], tenant: Tenant,
                   template: Template | None, *, user: User) -> dict[str, Any]:
    """The live check of what the form holds (`values`: its fields as typed) for a launch of
    `template` (None: none chosen; the nodes field counts for a distributed one only). Its
    notes are the launch advice's (advice.py), as `POST workloads/check/` answers them: the
    cluster and the quota, a budget its maximum runtime would cross (blank: the project's
    limit), the calendar."""
    slug, count_text = values.get("gpu_type", ""), values.get("gpu_count", "")
    runtime_text = values.get("max_runtime_minutes")
    row = next((r for r in availability.rows if r.gpu_type.slug == slug), None)
    count = _whole_number(count_text)
    nodes_text = _nodes_text(template, values)
    nodes = 1 if nodes_text is None else _whole_number(nodes_text)
    if row is None:
        return {"row": None, "count": count, "notes": [("warning", "Choose a GPU type.")]}
    if count is None or count < 1:
        return {"row": row, "count": count,
                "notes": [("warning", "Give the number of GPUs as a whole number, 1 or more.")]}
    if nodes is None or nodes < 1:
        return {"row": row, "count": count,
                "notes": [("warning", "Give the number of nodes as a whole number, 1 or more.")]}
    runtime = _whole_number(runtime_text)
    notes = launch_advice(launch_context(
        tenant=tenant, user=user, gpu_type=row.gpu_type, template=template,
        gpus_per_node=count, nodes=nodes,
        max_runtime_minutes=runtime if runtime and runtime > 0 else None,
        reads=availability.reads))
    return {"row": row, "count": count, "nodes": nodes, "notes": notes,
            "never": any(level == "error" for level, _ in notes)}


# --- the launch page ------------------------------------------------------------------------

def _template_named(templates: list[Template], slug: str | None) -> Template | None:
    return next((t for t in templates if t.slug == slug), None)


def _initial_values(request: TenantRequest, templates: list[Template],
                    rows: list[GpuAvailability]) -> dict[str, str]:
    available = [t for t in templates if not getattr(t, "unavailable", "")]
    template = _template_named(available, request.GET.get("template")) or \
        (available[0] if available else None)
    wanted_type = request.GET.get("gpu_type")
    row = next((r for r in rows if r.gpu_type.slug == wanted_type), None) or \
        next((r for r in rows if r.may_use > 0), None) or (rows[0] if rows else None)
    values = {"name": "", "gpu_count": "1", "nodes": "1", "max_runtime_minutes": "", "retries": "",
              "image": "", "command": "", "args": "", "env": "", "port": "",
              "gpu_type": row.gpu_type.slug if row else "",
              "idempotency_key": secrets.token_urlsafe(18)}
    return _with_template_defaults(values, template)


def _with_template_defaults(values: dict[str, str], template: Template | None) -> dict[str, str]:
    if template is not None:
        values.update(template=template.slug, shown_template=template.slug,
                      cpu=str(template.default_cpu), memory=str(template.default_memory_gb),
                      kind=template.kind)
        if not template.custom:
            values["image"] = ""  # blank: the template's own (a custom image is not carried over)
        # the box starts as the API's default: ticked for a service whose template offers SSH
        # (the custom template starts as a batch job, which gets SSH only when asked)
        values["ssh"] = "on" if ssh_by_default(template, template.kind) else ""
    return values


def _posted_values(post: QueryDict, templates: list[Template]) -> dict[str, str]:
    """What was typed; when the template changed, its defaults replace the old template's."""
    values = {key: post.get(key, "") for key in post if key != "csrfmiddlewaretoken"}
    values["use_home"] = "on" if post.get("use_home") else ""
    values["public"] = "on" if post.get("public") else ""
    values["ssh"] = "on" if post.get("ssh") else ""
    template = _template_named(templates, values.get("template"))
    if template is not None and values.get("shown_template") != template.slug:
        _with_template_defaults(values, template)
    return values


def _error_summary(errors: dict[str, list[str]]) -> list[dict[str, str]]:
    return [{"field": field, "label": FIELD_LABELS[field], "message": message}
            for field in FIELD_LABELS for message in errors.get(field, [])]


def _nodes_text(template: Template | None, values: Mapping[str, str]) -> str | None:
    """The nodes the live check counts: a distributed template's field (None: one pod)."""
    return (values.get("nodes") or "1") if template is not None and template.distributed \
        else None


def _with_availability(templates: list[Template]) -> list[Template]:
    """Each template with `unavailable`: why a distributed one cannot run on this cluster
    (no JobSet or MPI operator, or no Kueue), else "". The page disables it, with the reason."""
    for template in templates:
        setattr(template, "unavailable",  # noqa: B010 (a page attribute, not the model's)
                (engine_refusal(template.engine) or "") if template.distributed else "")
    return templates


def _service_access_context(tenant: Tenant) -> dict[str, bool]:
    """What the tenant's rule lets its launches choose: public services, SSH."""
    rule = tenant_service_access(tenant)
    return {"may_go_public": rule.allow_public, "ssh_off": not rule.ssh_enabled}


def _launch_render(request: TenantRequest, tenant: Tenant, templates: list[Template],
                   values: dict[str, str], *, errors: dict[str, list[str]] | None = None,
                   refused: str = "", status: int = 200,
                   availability: Availability | None = None) -> HttpResponse:
    if availability is None:
        availability = gpu_availability(tenant, tenant.quota)
    errors = errors or {}
    template = _template_named(templates, values.get("template"))
    launch_clusters = list(clusters_visible(request.identity))
    return render(request, "workloads/launch.html", {
        "tenant": tenant, "quota": tenant.quota, "templates": templates,
        **_service_access_context(tenant),
        "site_registries": settings.PORTAL_IMAGE_REGISTRIES,
        "root_admitted": tenant_admits_root(tenant),
        "template": template,
        "gpu_rows": availability.rows, "cluster_error": availability.cluster_error,
        "values": values,
        "errors": errors, "error_summary": _error_summary(errors), "refused": refused,
        "check": _check_context(availability, values, tenant, template, user=request.user),
        "queueing": queueing_shown(),
        "addresses": service_addresses(),
        "usable_secrets": secrets_usable(request.identity, tenant),
        "chosen_secrets": request.POST.getlist("secrets") if request.method == "POST" else [],
        "usable_datasets": datasets_mountable(request.identity, tenant),
        # the cluster to run on: a choice only where there are several
        "launch_clusters": launch_clusters if len(launch_clusters) > 1 else [],
        "chosen_cluster": request.POST.get("cluster", "") if request.method == "POST" else "",
        "chosen_datasets": request.POST.getlist("datasets") if request.method == "POST" else [],
    }, status=status)


@project_required
@require_http_methods(["GET", "POST"])
@tenant_required(Action.LAUNCH)
def launch(request: TenantRequest) -> HttpResponse:
    tenant = request.tenant
    templates = _with_availability(list(Template.objects.filter(enabled=True)))
    if request.method == "GET":
        availability = gpu_availability(tenant, tenant.quota)
        return _launch_render(request, tenant, templates,
                              _initial_values(request, templates, availability.rows),
                              availability=availability)
    values = _posted_values(request.POST, templates)
    if request.POST.get("refresh"):  # without JavaScript: show the chosen template's fields
        return _launch_render(request, tenant, templates, values)
    return _launch_submit(request, tenant, templates, values)


def _launch_submit(request: TenantRequest, tenant: Tenant, templates: list[Template],
                   values: dict[str, str]) -> HttpResponse:
    post = request.POST
    template = _template_named(templates, post.get("template"))
    data, errors = launch_request(post, template)
    shown = _template_named(templates, post.get("shown_template"))
    if template is not None and shown is not None and shown != template:
        # CPU and memory still hold the previous template's defaults: not a choice made
        for field, default in (("cpu", shown.default_cpu), ("memory", shown.default_memory_gb)):
            if data.get(field) == str(default):
                data.pop(field)
    form = LaunchForm(data, tenant=tenant, quota=tenant.quota, identity=request.identity)
    if not form.is_valid():
        for field, messages_ in form.field_errors().items():
            errors.setdefault(field, []).extend(messages_)
    if errors:
        return _launch_render(request, tenant, templates, values, errors=errors, status=400)
    assert form.request is not None  # is_valid() holds
    try:
        workload, created = workload_launch(tenant=tenant, user=request.user,
                                            request=form.request,
                                            idempotency_key=_idempotency_key(post))
    except AdmissionRefused as exc:
        return _launch_render(request, tenant, templates, values, refused=str(exc),
                              errors={"form": [str(exc)]}, status=403)
    if created:
        messages.success(request, f"{workload.name} was submitted: {workload.gpus_text}, "
                                  f"{workload.template.name}.")
    else:
        messages.info(request, f"{workload.name} was already submitted by this form.")
    return redirect(workload)


def _idempotency_key(post: QueryDict) -> str | None:
    """The form's one-time key plus a digest of what it asks for: the same form sent twice
    (a double click, a reload) launches once; changed and sent again, it launches anew."""
    form_key = post.get("idempotency_key", "")[:64]
    if not form_key:
        return None
    asked = sorted((key, value) for key, values in post.lists() for value in values
                   if key not in {"csrfmiddlewaretoken", "idempotency_key", "refresh"})
    digest = hashlib.sha256(json.dumps(asked).encode()).hexdigest()[:32]
    return f"{form_key}:{digest}"


@project_required
@require_GET
@tenant_required(Action.LAUNCH)
def launch_check(request: TenantRequest) -> HttpResponse:
    """htmx: free GPUs and quota left for the chosen type and count (on each of the nodes, for
    a distributed template), with warnings."""
    tenant = request.tenant
    availability = gpu_availability(tenant, tenant.quota)
    template = Template.objects.filter(enabled=True, slug=request.GET.get("template")).first()
    return render(request, "workloads/_launch_check.html", {
        "check": _check_context(availability, request.GET, tenant, template,
                                user=request.user),
        "cluster_error": availability.cluster_error, "tenant": tenant,
    })


@project_required
@require_POST
@tenant_required(Action.LAUNCH)
def launch_fields(request: TenantRequest) -> HttpResponse:
    """htmx: the chosen template's fields (CPU and memory defaults, the custom image part, a
    distributed template's program), and out of band the nodes field beside the GPU count."""
    if not request.htmx:
        return redirect("workloads:launch")
    tenant = request.tenant
    templates = list(Template.objects.filter(enabled=True))
    values = _posted_values(request.POST, templates)
    return render(request, "workloads/_template_fields_swap.html", {
        "template": _template_named(templates, values.get("template")), "values": values,
        "errors": {}, "quota": tenant.quota, "tenant": tenant,
        **_service_access_context(tenant),
        "site_registries": settings.PORTAL_IMAGE_REGISTRIES,
    })


# --- the list -------------------------------------------------------------------------------

def _list_context(request: ProjectRequest) -> dict[str, Any]:
    params = request.GET.copy()
    if params.get("state") == "active":
        params.setlist("state", list(Workload.ACTIVE_STATES))
    filterset = WorkloadFilterSet(params, queryset=_project_workloads(request), request=request)
    page = Paginator(filterset.qs, PAGE_SIZE).get_page(request.GET.get("page"))
    rules: dict[int, str] = {}  # tenant → its rule of who gets through, read once
    for workload in page:
        workload.may_change = workload_may_change(request.identity, workload)
        workload.may_open = _may_open(request, workload, rules)
    annotate_queue(page)
    annotate_clusters(page)
    query = request.GET.copy()
    query.pop("page", None)
    return {
        "filterset": filterset, "page": page, "workloads": list(page),
        "polling": any(w.is_active for w in page), "poll_seconds": POLL_SECONDS,
        "query": request.GET.urlencode(), "page_query": query.urlencode(),
        # where Stop comes back to: the list as filtered (also when the rows were polled)
        "list_url": reverse("workloads:list") + (f"?{request.GET.urlencode()}"
                                                 if request.GET else ""),
        "state_filter": request.GET.get("state", ""), "mine": request.GET.get("mine") == "true",
        "states": Workload.State.choices, "filtered": bool(request.GET.get("state")
                                                           or request.GET.get("mine")),
    }


@project_required
@require_GET
def workload_list(request: ProjectRequest) -> HttpResponse:
    return render(request, "workloads/workload_list.html", _list_context(request))


@project_required
@require_GET
def workload_rows(request: ProjectRequest) -> HttpResponse:
    """htmx: the table body; it polls itself while a shown workload is active."""
    return render(request, "workloads/_workload_rows.html", _list_context(request))


# --- one workload ---------------------------------------------------------------------------

def _may_open(request: ProjectRequest, workload: Workload, rules: dict[int, str] | None = None,
              *, ssh: bool = False) -> bool:
    """Whether the page offers to open the workload (`ssh`: to SSH into it): it is of the
    current project and the project's rule lets this user through its proxy (others would
    meet the proxy's 403; SSH is a member's right whatever the rule)."""
    identity = request.identity
    if request.tenant is None or workload.tenant_id != request.tenant.pk:
        return False
    rules = {} if rules is None else rules
    if workload.tenant_id not in rules:
        rules[workload.tenant_id] = tenant_service_access(workload.tenant).who
    return access_decision(workload=workload, user=request.user, role=identity.role,
                           is_admin=identity.is_admin, who=rules[workload.tenant_id],
                           ssh=ssh).allowed


def _ranks_shown(workload: Workload) -> list[dict[str, Any]]:
    """A distributed workload's ranks as the tracker last saw them, in rank order, the MPI
    launcher last; each with `choice`, the value of the log viewer's ?rank= for it."""
    workers = sorted((r for r in workload.ranks if r.get("role") != "launcher"),
                     key=lambda r: (r.get("rank") is None, r.get("rank") or 0))
    launchers = [r for r in workload.ranks if r.get("role") == "launcher"]
    return [{**r, "choice": "launcher" if r.get("role") == "launcher" else str(r.get("rank"))}
            for r in workers + launchers]


def _rank_chosen(request: ProjectRequest, ranks: list[dict[str, Any]]) -> str | None:
    """The rank whose logs the page shows (?rank=N or ?rank=launcher), None: the default
    (what GET workloads/{id}/logs/ without ?rank= answers)."""
    wanted = request.GET.get("rank")
    return wanted if any(r["choice"] == wanted for r in ranks) else None


def _logs(workload: Workload, rank: str | None) -> list[str]:
    if rank is None:
        return workload_logs(workload, tail=LOG_TAIL)
    # one rank's pod, as GET workloads/{id}/logs/?rank= reads it (workloads/logs.py)
    return workload_logs(workload, tail=LOG_TAIL,
                         rank=rank if rank == "launcher" else int(rank))


def _detail_context(request: ProjectRequest, workload: Workload) -> dict[str, Any]:
    logs, logs_error = None, None
    ranks = _ranks_shown(workload)
    rank = _rank_chosen(request, ranks)
    try:
        logs = _logs(workload, rank)
    except KubeError as exc:
        log.warning("cluster unreachable for the logs of workload %s: %s", workload.pk, exc)
        logs_error = f"{CLUSTER_UNREACHABLE}: the logs cannot be read. The state shown is " \
                     "the portal's last record."
    events = list(workload.events.order_by("-at", "-id")[:EVENTS_SHOWN])[::-1]
    annotate_queue([workload])
    annotate_clusters([workload])
    argv = [*workload.command, *workload.args]
    may_see_secrets = workload_may_see_secrets(request.identity, workload)
    if not may_see_secrets:
        # other members and readers see that it runs, not how to get in: no access token in
        # the logs, the events or the arguments (the rows are not saved)
        logs = workload_redact(workload, logs) if logs is not None else None
        argv = workload_redact(workload, argv)
        for event in events:
            event.message = redact(event.message, (workload.access_token,))
    return {
        "workload": workload,
        "may_change": workload_may_change(request.identity, workload),
        "may_open": _may_open(request, workload),
        "may_ssh": _may_open(request, workload, ssh=True),
        "argv": argv,
        "access": workload_access_summary(workload),
        # the SSH panel: the commands while it runs, for those the rule lets in (the portal
        # refuses a certificate to anyone else); SSH turned off for the project since
        "ssh_off": workload.ssh and not tenant_service_access(workload.tenant).ssh_enabled,
        "events": events, "logs": logs, "logs_error": logs_error,
        "polling": workload.is_active, "poll_seconds": POLL_SECONDS, "log_tail": LOG_TAIL,
        "ranks": ranks, "rank": rank,
        "ranks_running": sum(1 for r in ranks if r.get("state") == "running"
                             and r.get("role") != "launcher"),
        "secrets": launch_secrets(workload),
        "checkpoint": launch_checkpoint(workload),
    }


def _in_another_project(request: ProjectRequest, pk: int) -> HttpResponse | None:
    """A link to a workload of another of the user's projects: offer to switch to it (None:
    not one of theirs, a 404)."""
    project = selectors.workload_project_elsewhere(request.identity, pk)
    if project is None:
        return None
    return render(request, "workloads/other_project.html", {"workload_id": pk, "project": project})


def _gone(request: ProjectRequest, pk: int) -> HttpResponse:
    """Deleted meanwhile: leave the page rather than poll a 404."""
    if request.htmx:
        response = HttpResponse(status=204)
        response["HX-Redirect"] = reverse("workloads:list")
        return response
    return redirect(Workload(pk=pk).get_absolute_url())


def _with_relations(workloads: TenantScopedQuerySet[Workload]) -> TenantScopedQuerySet[Workload]:
    assert isinstance(workloads, WorkloadQuerySet)  # Workload.objects'
    return workloads.with_relations()


@project_required
@require_GET
@scoped_object(Workload, queryset=_with_relations, on_missing=_in_another_project)
def workload_detail(request: ProjectRequest, workload: Workload) -> HttpResponse:
    return render(request, "workloads/workload_detail.html", _detail_context(request, workload))


@project_required
@require_GET
@scoped_object(Workload, queryset=_with_relations, on_missing=_gone)
def workload_live(request: ProjectRequest, workload: Workload) -> HttpResponse:
    """htmx: state, events and logs; it polls itself while the workload is active."""
    return render(request, "workloads/_workload_live.html", _detail_context(request, workload))


@project_required
@require_POST
@scoped_object(Workload, Action.CHANGE, queryset=_with_relations)
def stop(request: ProjectRequest, workload: Workload) -> HttpResponse:
    if workload.is_active:
        workload_stop(workload=workload, user=request.user)
        messages.success(request, f"{workload.name} is stopping; its GPUs are released when "
                                  "its pods are gone.")
    else:
        messages.info(request, f"{workload.name} had already ended ({workload.state}).")
    return redirect(safe_redirect_target(request, request.POST.get("next"))
                    or workload.get_absolute_url())


@project_required
@require_POST
@scoped_object(Workload, Action.CHANGE, queryset=_with_relations)
def delete(request: ProjectRequest, workload: Workload) -> HttpResponse:
    workload_delete(workload=workload, user=request.user)
    messages.success(request, f"{workload.name} was deleted."
                              f"{' Its containers are being stopped.' if workload.is_active else ''}")
    return redirect("workloads:list")
