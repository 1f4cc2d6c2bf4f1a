from rest_framework.routers import SimpleRouter

from .views import DatasetViewSet, StorageClassViewSet, VolumeViewSet

router = SimpleRouter()
router.register("volumes", VolumeViewSet, basename="volume")
router.register("datasets", DatasetViewSet, basename="dataset")
router.register("storage-classes", StorageClassViewSet, basename="storage-class")

urlpatterns = router.urls
