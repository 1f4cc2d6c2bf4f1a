"""The admin's tenant pages, mounted under /admin/."""

from django.urls import path

from . import admin_views

app_name = "tenants"

urlpatterns = [
    path("tenants/", admin_views.tenant_list, name="list"),
    path("tenants/<int:pk>/", admin_views.tenant_detail, name="detail"),
    path("tenants/<int:pk>/row/", admin_views.tenant_quota_row, name="row"),
    path("tenants/<int:pk>/reconcile/", admin_views.tenant_reconcile_now, name="reconcile"),
    path("tenants/<int:pk>/pod-security/", admin_views.tenant_root_templates, name="pod-security"),
    path("tenants/<int:pk>/image-prefixes/", admin_views.tenant_image_prefixes, name="image-prefixes"),
    path("tenants/<int:pk>/delete/", admin_views.tenant_delete, name="delete"),
    path("tenants/<int:pk>/restore/", admin_views.tenant_restore_view, name="restore"),
    path("tenants/<int:pk>/department/", admin_views.tenant_department, name="department"),
    path("departments/", admin_views.department_list, name="departments"),
    path("departments/<int:pk>/", admin_views.department_detail, name="department-detail"),
    path("departments/<int:pk>/delete/", admin_views.department_delete_view,
         name="department-delete"),
]
