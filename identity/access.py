"""Who may open a page: every page view's access decorators, in one place.

- `login_required`: signed in (else the login page, with `next`).
- `admin_required`: a portal admin (else 403).
- `project_required`: signed in with a current project (else the "no project yet" page).
- `tenant_required(action)`: the current project's tenant (`request.tenant`, resolved once by
  tenants/middleware.py) is there (else 404) and the identity may `action` in it (else 403).
- `scoped_object(Model, action)`: the page's object, looked up through
  `Model.objects.restrict(identity, "view")` (identity/scoping.py): another tenant's
  object is a 404, never a 403; one of the caller's tenant that their role may not `action`
  is a 403. The view receives the object instead of its `pk`.

The API's counterparts are api/permissions.py and api/viewsets.py (TenantScopedViewSet).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db.models import Model
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBase
from django.shortcuts import render
from django_htmx.middleware import HtmxDetails

from .identity import Identity
from .scoping import Action, TenantScopedQuerySet, tenant_scoped

if TYPE_CHECKING:
    from .models import User

__all__ = ["PortalRequest", "SignedInRequest", "admin_required", "login_required", "project_required",
           "scoped_object", "tenant_required"]

# A page view, typed: its request (the request class it declares: SignedInRequest, …), its other
# parameters and its response. The decorators hand a view back with the same type, so that a
# decorated view keeps its signature (`scoped_object`, which trades the URL's `pk` for the
# object, keeps the request's type and the response's).
_P = ParamSpec("_P")
_Request = TypeVar("_Request", bound=HttpRequest)
_Response = TypeVar("_Response", bound=HttpResponseBase)
_M = TypeVar("_M", bound=Model)


class PortalRequest(HttpRequest):
    """A page's request as the middleware leaves it, for the type checker: `identity`
    (identity/middleware.py; None when signed out) and `htmx` (django-htmx)."""

    identity: Identity | None
    htmx: HtmxDetails


class SignedInRequest(PortalRequest):
    """The request of a view under `login_required` or `project_required`."""

    identity: Identity
    user: User  # signed in: never the anonymous user


def _identity(request: HttpRequest) -> Identity | None:
    """The request's identity (identity/middleware.py), None when signed out."""
    identity: Identity | None = getattr(request, "identity", None)
    return identity


def admin_required(view: Callable[Concatenate[_Request, _P], _Response],
                   ) -> Callable[Concatenate[_Request, _P], _Response]:
    @login_required
    @functools.wraps(view)
    def wrapper(request: _Request, /, *args: _P.args, **kwargs: _P.kwargs) -> _Response:
        identity = _identity(request)
        if identity is None or not identity.is_admin:
            raise PermissionDenied("Only portal administrators may open this page.")
        return view(request, *args, **kwargs)

    return wrapper


def project_required(view: Callable[Concatenate[_Request, _P], HttpResponse],
                     ) -> Callable[Concatenate[_Request, _P], HttpResponse]:
    """Signed in, with a current project (otherwise the 'no project yet' page)."""

    @login_required
    @functools.wraps(view)
    def wrapper(request: _Request, /, *args: _P.args, **kwargs: _P.kwargs) -> HttpResponse:
        identity = _identity(request)
        if identity is None or identity.project is None:
            return render(request, "portal/no_projects.html")
        return view(request, *args, **kwargs)

    return wrapper


REFUSALS = {Action.LAUNCH: "Your role in this project cannot launch workloads.",
            Action.CHANGE: "Your role in this project may not change this."}


def tenant_required(action: Action = Action.VIEW,
                    ) -> Callable[[Callable[Concatenate[_Request, _P], _Response]],
                                  Callable[Concatenate[_Request, _P], _Response]]:
    """The current project's tenant, which the identity may `action` in (use under
    `project_required`)."""
    def decorate(view: Callable[Concatenate[_Request, _P], _Response],
                 ) -> Callable[Concatenate[_Request, _P], _Response]:
        @functools.wraps(view)
        def wrapper(request: _Request, /, *args: _P.args, **kwargs: _P.kwargs) -> _Response:
            tenant: Model | None = getattr(request, "tenant", None)
            if tenant is None:
                raise Http404("The current project has no tenant in the portal.")
            tenants = tenant_scoped(type(tenant)._default_manager.all())
            if not tenants.permits(_identity(request), action, tenant):
                raise PermissionDenied(REFUSALS.get(action, "You may not do this here."))
            return view(request, *args, **kwargs)

        return wrapper

    return decorate


def scoped_object(model: type[_M], action: Action = Action.VIEW, *, kwarg: str = "pk",
                  queryset: Callable[[TenantScopedQuerySet[_M]], TenantScopedQuerySet[_M]] | None = None,
                  on_missing: Callable[[_Request, int], HttpResponse | None] | None = None,
                  ) -> Callable[[Callable[Concatenate[_Request, ...], _Response]],
                                Callable[Concatenate[_Request, ...], _Response | HttpResponse]]:
    """The object named by the URL's `kwarg`, from `model.objects.restrict(identity, "view")`
    (or `queryset(model.objects.all())`'s restriction); the view gets it as its `kwarg`'s model
    name (`workload`, `tenant`, …). Not visible: `on_missing(request, pk)`'s answer, or 404.
    Visible but not `action`-able: 403."""
    name = model._meta.model_name or model.__name__.lower()  # (Django's own fallback)

    def decorate(view: Callable[Concatenate[_Request, ...], _Response],
                 ) -> Callable[Concatenate[_Request, ...], _Response | HttpResponse]:
        @functools.wraps(view)
        def wrapper(request: _Request, /, *args: Any, **kwargs: Any) -> _Response | HttpResponse:
            # the URL's captured values, as Django's resolver passes them
            pk: int = kwargs.pop(kwarg)
            rows = tenant_scoped(model._default_manager.all())  # `objects`, its only manager
            base = queryset(rows) if queryset is not None else rows
            identity = _identity(request)
            obj = base.restrict(identity, Action.VIEW).filter(pk=pk).first()
            if obj is None:
                answer = on_missing(request, pk) if on_missing is not None else None
                if answer is None:
                    raise Http404(f"No such {model._meta.verbose_name}.")
                return answer
            if action is not Action.VIEW and not rows.permits(identity, action, obj):
                raise PermissionDenied(REFUSALS.get(action, "You may not do this."))
            return view(request, *args, **{name: obj}, **kwargs)

        return wrapper

    return decorate
