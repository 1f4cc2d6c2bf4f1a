from django.urls import path
from rest_framework.routers import SimpleRouter

from .views import SSHSessionReportView, WorkloadViewSet

router = SimpleRouter()
router.register("workloads", WorkloadViewSet, basename="workload")

urlpatterns = [
    *router.urls,
    # a workload's SSH server reports its sessions here, by its report token only
    path("ssh-sessions/", SSHSessionReportView.as_view(), name="ssh-sessions"),
]
