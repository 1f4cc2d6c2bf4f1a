"""The Secrets page (`/secrets/`): your secrets and your project's, by name, kind and keys; a
form to make one; per secret, its page to replace its data or delete it. A value is typed once
and shown never. The same rules as the API (querysets.py, validation.py, services.py); a
cluster that does not answer leaves nothing recorded and says so (503)."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.debug import sensitive_post_parameters, sensitive_variables
from django.views.decorators.http import require_http_methods, require_POST

from identity.access import project_required, scoped_object, tenant_required
from identity.scoping import Action
from kube.client import KubeError
from tenants.middleware import TenantRequest

from .forms import SecretDataForm, SecretForm
from .models import Secret
from .selectors import secret_may_change, secret_may_create, secrets_visible
from .services import (
    RegistryLoginRefused,
    SecretNameTaken,
    secret_create,
    secret_delete,
    secret_replace,
)

UNAVAILABLE = ("The cluster did not answer, so nothing was saved; try again later.")


def _list_page(request: TenantRequest, form: SecretForm | None = None,
               status: int = 200) -> HttpResponse:
    identity = request.identity
    rows = [(secret, secret_may_change(identity, secret))
            for secret in secrets_visible(identity, request.tenant)]
    return render(request, "credentials/secrets.html", {
        "rows": rows, "form": form or SecretForm(), "tenant": request.tenant,
        "may_create": secret_may_create(identity, request.tenant, Secret.Scope.USER),
        "may_create_project": secret_may_create(identity, request.tenant,
                                                Secret.Scope.PROJECT),
    }, status=status)


@sensitive_post_parameters()
@sensitive_variables()
@project_required
@require_http_methods(["GET", "POST"])
@tenant_required(Action.VIEW)
def secret_list(request: TenantRequest) -> HttpResponse:
    if request.method == "GET":
        return _list_page(request)
    form = SecretForm(request.POST)
    if not form.is_valid():
        return _list_page(request, form, status=400)
    scope = form.cleaned_data["scope"]
    if not secret_may_create(request.identity, request.tenant, scope):
        form.add_error("scope", "Only the project's managers make project secrets."
                       if scope == Secret.Scope.PROJECT else
                       "Your role in this project cannot make secrets.")
        return _list_page(request, form, status=403)
    try:
        secret = secret_create(tenant=request.tenant, acting_user=request.user,
                               name=form.cleaned_data["name"], kind=form.cleaned_data["kind"],
                               scope=scope, data=form.data_clean)
    except SecretNameTaken as exc:
        form.add_error("name", exc.errors["name"])
        return _list_page(request, form, status=409)
    except RegistryLoginRefused as exc:
        form.add_error(None, exc.errors["data"])
        return _list_page(request, form, status=400)
    except KubeError:
        form.add_error(None, UNAVAILABLE)
        return _list_page(request, form, status=503)
    messages.success(request, f"The secret {secret.name} was saved; its value is not shown "
                              "again.")
    return redirect("credentials:list")


def _detail_page(request: TenantRequest, secret: Secret, form: SecretDataForm | None = None,
                 status: int = 200) -> HttpResponse:
    return render(request, "credentials/secret.html", {
        "secret": secret, "form": form or SecretDataForm(kind=secret.kind),
        "may_change": secret_may_change(request.identity, secret)}, status=status)


@sensitive_post_parameters()
@sensitive_variables()
@project_required
@require_http_methods(["GET", "POST"])
@scoped_object(Secret, Action.VIEW)
def secret_detail(request: TenantRequest, secret: Secret) -> HttpResponse:
    """Its name, kind and keys; POST replaces its data (who may change it only)."""
    if request.method == "GET":
        return _detail_page(request, secret)
    if not secret_may_change(request.identity, secret):
        return _detail_page(request, secret, status=403)
    form = SecretDataForm(request.POST, kind=secret.kind)
    if not form.is_valid():
        return _detail_page(request, secret, form, status=400)
    try:
        secret_replace(secret=secret, acting_user=request.user, data=form.data_clean)
    except RegistryLoginRefused as exc:
        form.add_error(None, exc.errors["data"])
        return _detail_page(request, secret, form, status=400)
    except KubeError:
        form.add_error(None, UNAVAILABLE)
        return _detail_page(request, secret, form, status=503)
    messages.success(request, f"The data of {secret.name} was replaced.")
    return redirect("credentials:detail", pk=secret.pk)


@project_required
@require_POST
@scoped_object(Secret, Action.CHANGE)
def secret_remove(request: TenantRequest, secret: Secret) -> HttpResponse:
    try:
        secret_delete(secret=secret, acting_user=request.user)
    except KubeError:
        messages.error(request, "The cluster did not answer, so the secret was not deleted.")
        return redirect("credentials:detail", pk=secret.pk)
    messages.success(request, f"The secret {secret.name} was deleted.")
    return redirect("credentials:list")
