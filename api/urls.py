from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView

from . import views

app_name = "api"

urlpatterns = [
    path("v1/me/", views.MeView.as_view(), name="me"),
    path("v1/", include("tenants.api.urls")),
    path("v1/", include("portal.workloads.api.urls")),
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
]
