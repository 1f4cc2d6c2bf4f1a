from rest_framework.routers import SimpleRouter

from .views import AuditRecordViewSet

router = SimpleRouter()
router.register("audit", AuditRecordViewSet, basename="audit")

urlpatterns = router.urls
