"""The OpenID Connect provider's endpoints, under /o/ (the issuer is <portal>/o): only what the
workloads' proxies use — no application management, no dynamic client registration."""

from django.urls import path, re_path
from oauth2_provider import views as oauth

from .oidc import WorkloadAuthorizationView

app_name = "oauth2_provider"  # django-oauth-toolkit reverses its own routes by this name

urlpatterns = [
    path("authorize/", WorkloadAuthorizationView.as_view(), name="authorize"),
    path("token/", oauth.TokenView.as_view(), name="token"),
    path("revoke_token/", oauth.RevokeTokenView.as_view(), name="revoke-token"),
    re_path(r"^\.well-known/openid-configuration/?$", oauth.ConnectDiscoveryInfoView.as_view(),
            name="oidc-connect-discovery-info"),
    path(".well-known/jwks.json", oauth.JwksInfoView.as_view(), name="jwks-info"),
    path("userinfo/", oauth.UserInfoView.as_view(), name="user-info"),
]
