"""The notifications pages: the list (`/notifications/`), the bell's live count, marking read,
and the preferences page with the webhooks (the user's own; the current project's, managed by
its managers: test, enable, confirm, delete; each with its state and its last delivery).
Server-rendered, every form a POST with CSRF; the bell polls with htmx. Every row is looked up
among the caller's own (`restrict`): another user's is a 404. A test is queued for the webhook
workers, its result on the page once they have it."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from identity.access import login_required
from tenants.middleware import ProjectRequest

from .filtersets import NotificationFilterSet
from .forms import WebhookForm
from .models import Channel, Kind, Notification, Webhook
from .selectors import (
    last_deliveries,
    preferences_of,
    project_webhooks_manageable,
    webhook_manageable,
)
from .services import (
    WebhookLimitReached,
    WebhookStateRefused,
    notification_read,
    notifications_read_all,
    preferences_set,
    webhook_confirm,
    webhook_create,
    webhook_delete,
    webhook_enable,
    webhook_test,
)
from .throttling import WebhookTestThrottle
from .webhook_urls import WebhookURLRefused

PAGE_SIZE = 50


@login_required
@require_GET
def notification_list(request: ProjectRequest) -> HttpResponse:
    rows = NotificationFilterSet(request.GET, Notification.objects.restrict(request.identity)
                                 .select_related("tenant"))
    page = Paginator(rows.qs, PAGE_SIZE).get_page(request.GET.get("page"))
    return render(request, "notifications/list.html", {
        "page": page, "notifications": page.object_list,
        "unread_only": request.GET.get("unread") == "true"})


@login_required
@require_GET
def bell(request: ProjectRequest) -> HttpResponse:
    """The bell alone: what the header's htmx poll swaps in every 30 seconds."""
    return render(request, "notifications/_bell.html")  # the count: context_processors.py


@login_required
@require_POST
def read(request: ProjectRequest, pk: int) -> HttpResponse:
    notification = get_object_or_404(Notification.objects.restrict(request.identity), pk=pk)
    notification_read(notification=notification)
    return redirect("notifications:list")


@login_required
@require_POST
def read_all(request: ProjectRequest) -> HttpResponse:
    marked = notifications_read_all(user=request.user)
    messages.success(request, f"{marked} notification{'s' if marked != 1 else ''} marked read.")
    return redirect("notifications:list")


def _preferences_page(request: ProjectRequest, *, form: WebhookForm | None = None,
                      created: Webhook | None = None, status: int = 200) -> HttpResponse:
    chosen = preferences_of(request.user)
    hooks = list(Webhook.objects.restrict(request.identity).select_related("user", "tenant"))
    last = last_deliveries([hook.pk for hook in hooks])
    for hook in hooks:
        hook.last_delivery = last.get(hook.pk)  # type: ignore[attr-defined]  # for the template
    return render(request, "notifications/preferences.html", {
        "channels": Channel.choices,
        "rows": [(kind, label, [(channel, chosen[(kind, channel)])
                                for channel in Channel.values])
                 for kind, label in Kind.choices],
        "own_webhooks": [(hook, True) for hook in hooks if hook.tenant_id is None],
        "project_webhooks": [(hook, webhook_manageable(request.identity, hook))
                             for hook in hooks if hook.tenant_id is not None],
        "may_add_project_webhook": project_webhooks_manageable(request.identity,
                                                               request.tenant),
        "form": form or WebhookForm(), "created": created,
    }, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def preferences(request: ProjectRequest) -> HttpResponse:
    """A table kinds × channels of checkboxes: a ticked box is on (a form sends only those)."""
    if request.method == "POST":
        ticked = set(request.POST.getlist("on"))
        preferences_set(user=request.user, choices={
            (kind, channel): f"{kind}.{channel}" in ticked
            for kind in Kind.values for channel in Channel.values})
        messages.success(request, "Your notification settings are saved.")
        return redirect("notifications:preferences")
    return _preferences_page(request)


@login_required
@require_POST
def webhook_add(request: ProjectRequest) -> HttpResponse:
    form = WebhookForm(request.POST)
    if not form.is_valid():
        return _preferences_page(request, form=form, status=400)
    tenant = None
    if form.cleaned_data["project"]:
        if not project_webhooks_manageable(request.identity, request.tenant):
            form.add_error("project", "Only the project's managers and portal administrators "
                                      "add its webhooks.")
            return _preferences_page(request, form=form, status=403)
        tenant = request.tenant
    try:
        webhook = webhook_create(acting_user=request.user, url=form.cleaned_data["url"],
                                 kinds=form.cleaned_data["kinds"], tenant=tenant)
    except WebhookURLRefused as exc:
        form.add_error("url", str(exc))
        return _preferences_page(request, form=form, status=400)
    except WebhookLimitReached as exc:
        form.add_error(None, str(exc))
        return _preferences_page(request, form=form, status=403)
    # the secret is on this answer only (no redirect: it is never shown again)
    return _preferences_page(request, created=webhook, status=201)


def _manageable_webhook(request: ProjectRequest, pk: int) -> Webhook:
    webhook = get_object_or_404(Webhook.objects.restrict(request.identity)
                                .select_related("user", "tenant", "created_by"), pk=pk)
    if not webhook_manageable(request.identity, webhook):
        raise PermissionDenied("Only the project's managers and portal administrators manage "
                               "its webhooks.")
    return webhook


@login_required
@require_POST
def webhook_remove(request: ProjectRequest, pk: int) -> HttpResponse:
    webhook_delete(acting_user=request.user, webhook=_manageable_webhook(request, pk))
    messages.success(request, "The webhook is deleted.")
    return redirect("notifications:preferences")


@login_required
@require_POST
def webhook_try(request: ProjectRequest, pk: int) -> HttpResponse:
    """Queue a test POST; the page shows the webhook's last delivery (reload for its answer).
    Past PORTAL_WEBHOOK_TEST_RATE (the API's and the page's tests together): 429."""
    webhook = _manageable_webhook(request, pk)
    throttle = WebhookTestThrottle()
    if not throttle.allow_request(request, None):  # type: ignore[arg-type]  # reads .user only
        messages.error(request, f"Too many tests: try again in {int(throttle.wait() or 1)} s.")
        return _preferences_page(request, status=429)
    delivery = webhook_test(acting_user=request.user, webhook=webhook)
    messages.success(request, f"A test is on its way (delivery {delivery.pk}): reload this page "
                              "for the receiver's answer.")
    return redirect(f"{reverse('notifications:preferences')}#webhook-{webhook.pk}")


def _state_change(request: ProjectRequest, pk: int, change: Any, done: str) -> HttpResponse:
    try:
        change(acting_user=request.user, webhook=_manageable_webhook(request, pk))
    except WebhookStateRefused as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, done)
    return redirect(f"{reverse('notifications:preferences')}#webhook-{pk}")


@login_required
@require_POST
def webhook_turn_on(request: ProjectRequest, pk: int) -> HttpResponse:
    return _state_change(request, pk, webhook_enable,
                         "The webhook is enabled: deliveries go out again.")


@login_required
@require_POST
def webhook_take_on(request: ProjectRequest, pk: int) -> HttpResponse:
    return _state_change(request, pk, webhook_confirm,
                         "The webhook is confirmed: it posts the project's notifications while "
                         "you are one of its managers.")
