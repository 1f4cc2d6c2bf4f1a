"""The admin's audit page, under /admin/ (admin_urls.py): the trail, filtered by tenant, user and
action, 50 records a page."""

from __future__ import annotations

from django.core.paginator import Paginator
from django.http import HttpResponse
from django.shortcuts import render

from identity.access import SignedInRequest, admin_required
from identity.scoping import Action

from .filtersets import AuditRecordFilterSet
from .models import AuditRecord


@admin_required
def audit_list(request: SignedInRequest) -> HttpResponse:
    filterset = AuditRecordFilterSet(request.GET or None,
                                     queryset=AuditRecord.objects.select_related("tenant")
                                     .restrict(request.identity, Action.VIEW))
    page = Paginator(filterset.qs, 50).get_page(request.GET.get("page"))
    # the tenant filter's choices: the model the records point at (tenants sits above audit,
    # so it is reached through the relation, not imported)
    tenant_model = AuditRecord._meta.get_field("tenant").related_model
    assert tenant_model is not None and not isinstance(tenant_model, str)
    return render(request, "audit/audit_list.html", {
        "filterset": filterset, "page": page,
        "tenants": tenant_model.objects.restrict(  # type: ignore[attr-defined]
            request.identity, Action.VIEW).only("pk", "name"),
    })
