"""The admin's workload pages, mounted under /admin/ (the URL names stay global: `queues`)."""

from django.urls import path

from . import admin_views

urlpatterns = [
    path("queues/", admin_views.queues, name="queues"),
]
