from rest_framework.routers import SimpleRouter

from .views import StorageClassViewSet, VolumeViewSet

router = SimpleRouter()
router.register("volumes", VolumeViewSet, basename="volume")
router.register("storage-classes", StorageClassViewSet, basename="storage-class")

urlpatterns = router.urls
