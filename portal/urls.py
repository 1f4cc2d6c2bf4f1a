from django.urls import include, path

from portal import health, metrics, views

urlpatterns = [
    path("", views.home, name="home"),
    path("", include("identity.urls")),
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", metrics.metrics_view, name="metrics"),
    path("", include("workloads.urls")),
    path("", include("usage.urls")),
    path("", include("budgets.urls")),
    path("", include("calendars.urls")),
    path("", include("notifications.urls")),
    path("admin/", include("tenants.admin_urls")),
    path("admin/", include("catalogue.admin_urls")),
    path("admin/", include("audit.admin_urls")),
    path("admin/", include("workloads.admin_urls")),
    path("admin/", include("access.admin_urls")),
    path("api/", include("api.urls")),
    # the OpenID Connect provider of the workloads' authenticating proxies (access)
    path("o/", include("access.urls")),
]

# a database outage answers 503, not a 500 trace; under /api/ every error is JSON
# (portal/errors.py)
handler400 = "portal.errors.bad_request"
handler403 = "portal.errors.permission_denied"
handler404 = "portal.errors.page_not_found"
handler500 = "portal.errors.server_error"
