from django.urls import path

from .views import ServiceAccessView

urlpatterns = [
    path("tenants/<int:pk>/service-access/", ServiceAccessView.as_view(),
         name="tenant-service-access"),
]
