"""The monthly report page (the API: api/urls.py), and the admin's prices page
(admin_urls.py) under /admin/ in the same namespace."""

from django.urls import include, path

from . import views

app_name = "billing"

urlpatterns = [
    path("reports/", views.report_page, name="report"),
    path("admin/", include("billing.admin_urls")),
]
