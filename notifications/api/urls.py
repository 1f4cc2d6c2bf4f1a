from django.urls import path
from rest_framework.routers import SimpleRouter

from .views import DeliveryViewSet, NotificationViewSet, PreferencesView, WebhookViewSet

router = SimpleRouter()
router.register("notifications/webhooks", WebhookViewSet, basename="notification-webhook")
router.register("notifications/deliveries", DeliveryViewSet, basename="notification-delivery")
router.register("notifications", NotificationViewSet, basename="notification")

urlpatterns = [
    path("notifications/preferences/", PreferencesView.as_view(),
         name="notification-preferences"),
    *router.urls,
]
