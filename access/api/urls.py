from django.urls import path

from .views import ServiceAccessView, SSHSessionReportView

urlpatterns = [
    path("tenants/<int:pk>/service-access/", ServiceAccessView.as_view(),
         name="tenant-service-access"),
    path("ssh-sessions/", SSHSessionReportView.as_view(), name="ssh-sessions"),
]
