"""The project's record pages: the current project's (`/project/`, every role in it: who leads
it, what pays for it, until when its allocation runs; a department's admins also find its
projects there), and one project's record to change (`/projects/<id>/record/`: admins and the
admins of its department; another project's is a 404). The form goes through the API's
serializer: one validation for both."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from catalogue.models import GpuType
from identity.access import SignedInRequest, login_required, project_required, tenant_required
from identity.scoping import Action
from tenants.middleware import TenantRequest
from tenants.models import Department, Tenant
from tenants.selectors import tenants_administered, tenants_reachable

from .models import ResourceRequest
from .selectors import (
    record_changeable,
    record_of,
    request_decidable_by,
    requests_visible,
)
from .services import (
    NotTheAsker,
    RequestRefused,
    record_set,
    request_approve,
    request_change,
    request_create,
    request_deny,
    request_words,
)
from .validation import TEMPORARY, RecordInvalid, RequestInvalid, record_clean, request_clean


@project_required
@require_GET
@tenant_required(Action.VIEW)
def record_page(request: TenantRequest) -> HttpResponse:
    tenant = request.tenant
    administered = list(Department.objects.administered_by(request.identity)
                        .prefetch_related("tenants")) if not request.identity.is_admin else []
    return render(request, "allocations/record.html", {
        "tenant": tenant, "record": record_of(tenant), "today": timezone.localdate(),
        "changeable": record_changeable(request.identity, tenant),
        "administered": administered,
    })


def _posted(request: SignedInRequest) -> dict[str, Any]:
    """The form's fields in the API's shape (grants one per line; empty PI and end: none)."""
    post = request.POST
    return {"principal_investigator": post.get("principal_investigator", "").strip() or None,
            "grants": [line.strip() for line in post.get("grants", "").splitlines()
                       if line.strip()],
            "field": post.get("field", ""),
            "allocation_ends": post.get("allocation_ends", "").strip() or None}


@login_required
@require_http_methods(["GET", "POST"])
def record_edit(request: SignedInRequest, pk: int) -> HttpResponse:
    tenant = tenants_reachable(request.identity).select_related("department").filter(pk=pk).first()
    if tenant is None:
        raise Http404("No such project.")
    if not tenants_administered(request.identity).filter(pk=tenant.pk).exists():
        raise PermissionDenied("Only portal administrators and the admins of the project's "
                               "department may change its record.")
    errors: dict[str, Any] = {}
    values = _posted(request) if request.method == "POST" else None
    if values is not None:
        try:
            changes = record_clean(values, tenant=tenant)
        except RecordInvalid as exc:
            errors = exc.errors
        else:
            record_set(tenant=tenant, acting_user=request.user, changes=changes)
            messages.success(request, f"The record of {tenant.name} is saved.")
            return redirect("allocations:record-edit", pk=tenant.pk)
    record = record_of(tenant)
    shown = values or {
        "principal_investigator": (record.principal_investigator.username
                                   if record.principal_investigator else ""),
        "grants": record.grants or [], "field": record.research_field,
        "allocation_ends": record.allocation_ends.isoformat() if record.allocation_ends else ""}
    return render(request, "allocations/record_edit.html", {
        "tenant": tenant, "record": record, "values": shown, "errors": errors,
        "today": timezone.localdate(), "changeable": record_changeable(request.identity, tenant),
    }, status=400 if errors else 200)


def _request_fields(request: SignedInRequest, kind: str | None = None) -> dict[str, Any]:
    """The ask form's fields in the API's shape: the kind's own fields into `details`."""
    post = request.POST
    kind = kind if kind is not None else post.get("kind", "")
    number = ("gpus", "gpu_hours", "count")
    details = {name: (int(value) if name in number and value.isascii() and value.isdigit()
                      else value)
               for name in ("gpu_type", "gpus", "gpu_hours", "count", "start", "end",
                            "allocation_ends")
               if (value := post.get(f"{kind}-{name}", "").strip())}
    return {"kind": kind, "details": details, "justification": post.get("justification", ""),
            "ends_at": post.get("ends_at", "").strip() or None}


@project_required
@require_http_methods(["GET", "POST"])
@tenant_required(Action.VIEW)
def requests_page(request: TenantRequest) -> HttpResponse:
    """The project's requests and the ask form (members and managers); for admins and
    department admins, the queue of the requests they decide."""
    tenant = request.tenant
    errors: dict[str, Any] = {}
    asked: dict[str, Any] = {}
    may_ask = Tenant.objects.permits(request.identity, Action.LAUNCH, tenant)
    if request.method == "POST":
        if not may_ask:
            raise PermissionDenied("Readers cannot ask; members and managers can.")
        asked = _request_fields(request)
        try:
            fields = request_clean(asked, now=timezone.now())
        except RequestInvalid as exc:
            errors = exc.errors
        else:
            made = request_create(tenant=tenant, asker=request.user, fields=fields)
            messages.success(request, f"Request {made.pk} asked: {request_words(made)}.")
            return redirect("allocations:requests")
    visible = requests_visible(request.identity)
    queue = [row for row in visible.filter(state=ResourceRequest.State.PENDING)
             if request_decidable_by(request.identity, row)]
    return render(request, "allocations/requests.html", {
        "tenant": tenant, "requests": visible.filter(tenant=tenant)[:200], "queue": queue,
        "may_ask": may_ask, "kinds": ResourceRequest.Kind.choices, "errors": errors,
        "asked": asked, "gpu_types": GpuType.objects.filter(enabled=True),
        "temporary": [str(kind) for kind in TEMPORARY],
    }, status=400 if errors else 200)


@login_required
@require_POST
def request_change_view(request: SignedInRequest, pk: int) -> HttpResponse:
    """The asker's change of their pending request, from the row's form (its kind stays)."""
    row = requests_visible(request.identity).filter(pk=pk).first()
    if row is None:
        raise Http404("No such request.")
    try:
        fields = request_clean(_request_fields(request, row.kind), now=timezone.now())
        fields.pop("kind")
        row = request_change(request=row, asker=request.user, fields=fields)
    except RequestInvalid as exc:
        messages.error(request, "; ".join(f"{field}: {' '.join(problems)}"
                                          for field, problems in exc.errors.items()))
    except NotTheAsker as exc:
        raise PermissionDenied(str(exc)) from None
    except RequestRefused as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Request {row.pk} changed: {request_words(row)}.")
    return redirect("allocations:requests")


def _decide(request: SignedInRequest, pk: int, decide: Any) -> HttpResponse:
    row = requests_visible(request.identity).filter(pk=pk).first()
    if row is None:
        raise Http404("No such request.")
    if not request_decidable_by(request.identity, row):
        raise PermissionDenied("Only portal administrators and the admins of the project's "
                               "department decide requests.")
    note = request.POST.get("note", "")[:2000]
    try:
        row = decide(request=row, decider=request.user, note=note)
    except RequestRefused as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Request {row.pk} {row.state}.")
    return redirect("allocations:requests")


@login_required
@require_POST
def request_approve_view(request: SignedInRequest, pk: int) -> HttpResponse:
    return _decide(request, pk, request_approve)


@login_required
@require_POST
def request_deny_view(request: SignedInRequest, pk: int) -> HttpResponse:
    return _decide(request, pk, request_deny)
