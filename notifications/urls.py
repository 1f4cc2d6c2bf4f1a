from django.urls import path

from . import views

app_name = "notifications"

urlpatterns = [
    path("notifications/", views.notification_list, name="list"),
    path("notifications/bell/", views.bell, name="bell"),
    path("notifications/<int:pk>/read/", views.read, name="read"),
    path("notifications/read-all/", views.read_all, name="read-all"),
    path("notifications/preferences/", views.preferences, name="preferences"),
    path("notifications/webhooks/", views.webhook_add, name="webhook-add"),
    path("notifications/webhooks/<int:pk>/delete/", views.webhook_remove, name="webhook-delete"),
    path("notifications/webhooks/<int:pk>/test/", views.webhook_try, name="webhook-test"),
    path("notifications/webhooks/<int:pk>/enable/", views.webhook_turn_on,
         name="webhook-enable"),
    path("notifications/webhooks/<int:pk>/confirm/", views.webhook_take_on,
         name="webhook-confirm"),
]
