"""The admin's usage pages, mounted under /admin/. Their URL names are in the usage namespace
(usage:admin, usage:gpu-dashboard): urls.py includes these, one namespace for the app."""

from django.urls import path

from . import admin_views

urlpatterns = [
    path("usage/", admin_views.admin_usage_page, name="admin"),
    path("gpus/", admin_views.gpu_dashboard, name="gpu-dashboard"),
]
