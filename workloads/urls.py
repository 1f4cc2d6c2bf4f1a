"""The researcher's workload pages (the admin's: admin_urls.py; the REST API: api/urls.py)."""

from django.urls import path

from . import views

app_name = "workloads"

urlpatterns = [
    path("workloads/", views.workload_list, name="list"),
    path("workloads/rows/", views.workload_rows, name="rows"),
    path("workloads/new/", views.launch, name="launch"),
    path("workloads/new/check/", views.launch_check, name="launch-check"),
    path("workloads/new/fields/", views.launch_fields, name="launch-fields"),
    path("workloads/<int:pk>/", views.workload_detail, name="detail"),
    path("workloads/<int:pk>/live/", views.workload_live, name="live"),
    path("workloads/<int:pk>/stop/", views.stop, name="stop"),
    path("workloads/<int:pk>/delete/", views.delete, name="delete"),
]
