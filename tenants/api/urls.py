from rest_framework.routers import SimpleRouter

from .views import AuditRecordViewSet, TenantViewSet

router = SimpleRouter()
router.register("tenants", TenantViewSet, basename="tenant")
router.register("audit", AuditRecordViewSet, basename="audit")

urlpatterns = router.urls
