from rest_framework.routers import SimpleRouter

from .views import DepartmentViewSet, TenantViewSet

router = SimpleRouter()
router.register("tenants", TenantViewSet, basename="tenant")
router.register("departments", DepartmentViewSet, basename="department")

urlpatterns = router.urls
