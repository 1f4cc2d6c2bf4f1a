from django.urls import include, path, re_path
from oauth2_provider import views as oauth

from portal import health, metrics, views
from workloads.oidc import WorkloadAuthorizationView

# The OpenID Connect provider of the workloads' authenticating proxies, under /o/ (the issuer is
# <portal>/o): django-oauth-toolkit's endpoints, its authorization one the workloads' own
# (workloads/oidc.py); only what the proxies use, no application management, no dynamic client
# registration. The namespace is the library's: it reverses its own routes by it.
oidc_provider = ([
    path("authorize/", WorkloadAuthorizationView.as_view(), name="authorize"),
    path("token/", oauth.TokenView.as_view(), name="token"),
    path("revoke_token/", oauth.RevokeTokenView.as_view(), name="revoke-token"),
    re_path(r"^\.well-known/openid-configuration/?$", oauth.ConnectDiscoveryInfoView.as_view(),
            name="oidc-connect-discovery-info"),
    path(".well-known/jwks.json", oauth.JwksInfoView.as_view(), name="jwks-info"),
    path("userinfo/", oauth.UserInfoView.as_view(), name="user-info"),
], "oauth2_provider")

urlpatterns = [
    path("", views.home, name="home"),
    path("", include("identity.urls")),
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", metrics.metrics_view, name="metrics"),
    path("", include("workloads.urls")),
    path("", include("usage.urls")),
    path("", include("storage.urls")),
    path("", include("budgets.urls")),
    path("", include("credentials.urls")),
    path("", include("calendars.urls")),
    path("", include("notifications.urls")),
    path("", include("files.urls")),
    path("", include("allocations.urls")),
    path("", include("billing.urls")),
    path("admin/", include("tenants.admin_urls")),
    path("admin/", include("catalogue.admin_urls")),
    path("admin/", include("clusters.admin_urls")),
    path("admin/", include("audit.admin_urls")),
    path("admin/", include("workloads.admin_urls")),
    path("admin/", include("access.admin_urls")),
    path("api/", include("api.urls")),
    path("o/", include(oidc_provider)),
]

# a database outage answers 503, not a 500 trace; under /api/ every error is JSON
# (portal/errors.py)
handler400 = "portal.errors.bad_request"
handler403 = "portal.errors.permission_denied"
handler404 = "portal.errors.page_not_found"
handler500 = "portal.errors.server_error"
