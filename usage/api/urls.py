from django.urls import path

from .views import UsageView, WorkloadUsageView

urlpatterns = [
    path("usage/", UsageView.as_view(), name="usage"),
    path("workloads/<int:pk>/usage/", WorkloadUsageView.as_view(), name="workload-usage"),
]
