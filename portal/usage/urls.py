"""The usage report pages (the API: portal/usage/api/urls.py)."""

from django.urls import path

from . import views

app_name = "usage"

urlpatterns = [
    path("usage/", views.usage_page, name="mine"),
    path("admin/usage/", views.admin_usage_page, name="admin"),
]
