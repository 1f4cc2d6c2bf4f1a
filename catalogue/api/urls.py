from rest_framework.routers import SimpleRouter

from .views import GpuTypeViewSet, TemplateViewSet

router = SimpleRouter()
router.register("gpu-types", GpuTypeViewSet, basename="gpu-type")
router.register("templates", TemplateViewSet, basename="template")

urlpatterns = router.urls
