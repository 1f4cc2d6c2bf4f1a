from rest_framework.routers import SimpleRouter

from .views import ClusterViewSet

router = SimpleRouter()
router.register("clusters", ClusterViewSet, basename="cluster")

urlpatterns = router.urls
