from django.urls import path

from . import views

app_name = "tenants"

urlpatterns = [
    path("tenants/", views.tenant_list, name="list"),
    path("tenants/<int:pk>/", views.tenant_detail, name="detail"),
    path("tenants/<int:pk>/row/", views.tenant_quota_row, name="row"),
    path("tenants/<int:pk>/reconcile/", views.tenant_reconcile_now, name="reconcile"),
    path("tenants/<int:pk>/pod-security/", views.tenant_root_templates, name="pod-security"),
    path("tenants/<int:pk>/image-prefixes/", views.tenant_image_prefixes, name="image-prefixes"),
    path("tenants/<int:pk>/delete/", views.tenant_delete, name="delete"),
    path("tenants/<int:pk>/restore/", views.tenant_restore_view, name="restore"),
]
