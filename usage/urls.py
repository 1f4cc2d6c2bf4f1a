"""The usage pages (the API: usage/api/urls.py): the researchers', and the admin's
(admin_urls.py) under /admin/ in the same namespace."""

from django.urls import include, path

from . import views

app_name = "usage"

urlpatterns = [
    path("usage/", views.usage_page, name="mine"),
    path("workloads/<int:pk>/gpu-usage/", views.workload_gpu_usage, name="workload-series"),
    path("workloads/<int:pk>/still-needed/", views.workload_still_needed,
         name="workload-still-needed"),
    path("workloads/<int:pk>/cull-exempt/", views.workload_cull_exempt,
         name="workload-cull-exempt"),
    path("admin/", include("usage.admin_urls")),
]
