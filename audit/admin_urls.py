"""The admin's audit page, mounted under /admin/."""

from django.urls import path

from . import admin_views

app_name = "audit"

urlpatterns = [
    path("audit/", admin_views.audit_list, name="list"),
]
