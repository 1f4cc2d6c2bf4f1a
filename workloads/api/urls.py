from rest_framework.routers import SimpleRouter

from .views import GpuTypeViewSet, TemplateViewSet, WorkloadViewSet

router = SimpleRouter()
router.register("gpu-types", GpuTypeViewSet, basename="gpu-type")
router.register("templates", TemplateViewSet, basename="template")
router.register("workloads", WorkloadViewSet, basename="workload")

urlpatterns = router.urls
