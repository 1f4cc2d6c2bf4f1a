"""`{% tenant_service_access tenant as rule %}`: a tenant's rule of who reaches its workloads
(the site default where none is saved), for the tenant page's section, which tenants/ renders
but cannot import (access sits above it)."""

from django import template

from tenants.models import Tenant

from ..models import TenantServiceAccess
from ..services import tenant_service_access as rule_of

register = template.Library()


@register.simple_tag
def tenant_service_access(tenant: Tenant) -> TenantServiceAccess:
    return rule_of(tenant)
