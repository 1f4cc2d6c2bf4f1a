from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from . import views

app_name = "api"

urlpatterns = [
    path("v1/me/", views.MeView.as_view(), name="me"),
    path("v1/", include("tenants.api.urls")),
    path("v1/", include("audit.api.urls")),
    path("v1/", include("catalogue.api.urls")),
    path("v1/", include("clusters.api.urls")),
    path("v1/", include("storage.api.urls")),
    path("v1/", include("workloads.api.urls")),
    path("v1/", include("credentials.api.urls")),
    path("v1/", include("usage.api.urls")),
    path("v1/", include("access.api.urls")),
    path("v1/", include("budgets.api.urls")),
    path("v1/", include("calendars.api.urls")),
    path("v1/", include("notifications.api.urls")),
    path("v1/", include("files.api.urls")),
    path("v1/", include("allocations.api.urls")),
    path("v1/", include("billing.api.urls")),
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    # Swagger UI from local assets (drf-spectacular-sidecar), public like the schema; the split
    # view serves its start script from ?script, so the page needs no inline script (CSP)
    path("docs/", SpectacularSwaggerSplitView.as_view(url_name="api:schema",
                                                      template_name="api/swagger_ui.html"),
         name="docs"),
    # last: every other path under /api/ is a 404 in the API's error format, never a page
    re_path(r"^(?P<path>.*)$", views.not_found, name="not-found"),
]
