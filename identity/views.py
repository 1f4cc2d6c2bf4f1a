"""Login, logout and the project switcher."""

from __future__ import annotations

import logging
import unicodedata
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import authenticate, login, logout
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_protect
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_POST

from core.redirects import safe_redirect_target

from . import identity as identity_store
from .backend import LOGIN_IDENTITY_ATTR
from .client import KeystoneError, KeystoneUnavailable
from .forms import LoginForm, SwitchProjectForm
from .services import identity_end, identity_switch_project, session_store

log = logging.getLogger(__name__)

REJECTED = "The credentials were not accepted."
UNREACHABLE = "The identity service (Keystone) is unreachable. Please try again shortly."


@sensitive_post_parameters("password")
@csrf_protect
@never_cache
def login_view(request: HttpRequest) -> HttpResponse:
    if request.user.is_authenticated and getattr(request, "identity", None) is not None:
        return redirect("home")
    form = LoginForm(request.POST or None, initial={"domain": settings.KEYSTONE_DEFAULT_DOMAIN})
    status = 200
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            user = authenticate(request, username=data["username"], password=data["password"],
                                domain=data["domain"])
            if user is None:
                form.add_error(None, REJECTED)
                status = 401
            else:
                login(request, user, backend="identity.backend.KeystoneBackend")
                session_store(request, getattr(request, LOGIN_IDENTITY_ATTR))
                return redirect(safe_redirect_target(request, request.GET.get("next")) or "home")
        except KeystoneUnavailable:
            log.warning("login failed: Keystone unreachable")
            form.add_error(None, UNREACHABLE)
            status = 503
    return render(request, "keystone/login.html", {"form": form}, status=status)


def login_throttle_username(request: HttpRequest,
                            credentials: dict[str, Any] | None = None) -> str | None:
    """The user name django-axes counts failed logins under (AXES_USERNAME_CALLABLE): folded
    (Unicode NFKC, case-folded, trimmed), so that `Student`, `STUDENT ` and `student` share one
    lock. Keystone's LDAP and MySQL back ends find users by name without regard to case, so
    each spelling would otherwise get its own tries at the same account."""
    username = (credentials or {}).get("username")
    if username is None:
        username = request.POST.get("username")
    if not isinstance(username, str):
        return None
    return unicodedata.normalize("NFKC", username).casefold().strip()


def login_locked_out(request: HttpRequest, credentials: dict[str, Any] | None = None,
                     *args: object, **kwargs: object) -> HttpResponse:
    """django-axes calls this once a user name has failed too often from one address."""
    minutes = int(settings.AXES_COOLOFF_TIME * 60)
    form = LoginForm(initial={"username": (credentials or {}).get("username", "")})
    message = (f"Too many failed logins for this user from your address. "
               f"Try again in {minutes} minutes.")
    return render(request, "keystone/login.html",
                  {"form": form, "locked_out": True, "page_errors": [message]}, status=429)


@require_POST
def logout_view(request: HttpRequest) -> HttpResponse:
    identity = identity_store.load(request.session)
    if identity is not None:
        identity_end(identity=identity)
    logout(request)
    messages.info(request, "You have logged out.")
    return redirect("login")


@require_POST
def switch_project_view(request: HttpRequest) -> HttpResponse:
    identity = getattr(request, "identity", None)
    if identity is None:
        return redirect("login")
    form = SwitchProjectForm(request.POST)
    if not form.is_valid() or not identity.has_project(form.cleaned_data["project_id"]):
        messages.error(request, "That is not one of your projects.")
        return redirect("home")
    try:
        identity = identity_switch_project(identity=identity,
                                           project_id=form.cleaned_data["project_id"])
    except KeystoneUnavailable:
        messages.error(request, UNREACHABLE)
        return redirect("home")
    except KeystoneError:
        messages.error(request, "Keystone did not let you into that project.")
        return redirect("home")
    session_store(request, identity)
    assert identity.project is not None  # scoped to one of its projects just now
    messages.success(request, f"Switched to project {identity.project.name}.")
    return redirect(safe_redirect_target(request, form.cleaned_data.get("next")) or "home")
