from django.urls import path
from rest_framework.routers import SimpleRouter

from .views import ProjectRecordView, RequestViewSet

router = SimpleRouter()
router.register("requests", RequestViewSet, basename="request")

urlpatterns = [
    path("tenants/<int:pk>/record/", ProjectRecordView.as_view(), name="tenant-record"),
    *router.urls,
]
