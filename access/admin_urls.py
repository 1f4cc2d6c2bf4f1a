"""The admin's service-access pages (a section of the tenant page), mounted under /admin/."""

from django.urls import path

from . import admin_views

app_name = "access-admin"

urlpatterns = [
    path("tenants/<int:pk>/ssh/", admin_views.tenant_ssh, name="tenant-ssh"),
]
