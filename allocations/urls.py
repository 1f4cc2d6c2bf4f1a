"""The project's record and requests pages (the API: api/urls.py)."""

from django.urls import path

from . import views

app_name = "allocations"

urlpatterns = [
    path("project/", views.record_page, name="record"),
    path("projects/<int:pk>/record/", views.record_edit, name="record-edit"),
    path("requests/", views.requests_page, name="requests"),
    path("requests/<int:pk>/change/", views.request_change_view, name="request-change"),
    path("requests/<int:pk>/approve/", views.request_approve_view, name="request-approve"),
    path("requests/<int:pk>/deny/", views.request_deny_view, name="request-deny"),
]
