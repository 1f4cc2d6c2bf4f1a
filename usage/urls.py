"""The usage report pages (the API: usage/api/urls.py)."""

from django.urls import path

from . import dashboard, views, workload_views

app_name = "usage"

urlpatterns = [
    path("usage/", views.usage_page, name="mine"),
    path("admin/usage/", views.admin_usage_page, name="admin"),
    path("admin/gpus/", dashboard.gpu_dashboard, name="gpu-dashboard"),
    path("workloads/<int:pk>/gpu-usage/", workload_views.workload_gpu_usage,
         name="workload-series"),
    path("workloads/<int:pk>/still-needed/", workload_views.workload_still_needed,
         name="workload-still-needed"),
    path("workloads/<int:pk>/cull-exempt/", workload_views.workload_cull_exempt,
         name="workload-cull-exempt"),
]
