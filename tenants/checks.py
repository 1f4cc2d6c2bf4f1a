from django.conf import settings
from django.core.checks import Error, register

from .naming import is_valid_prefix


@register()
def namespace_prefix_check(app_configs, **kwargs):
    if is_valid_prefix(settings.PORTAL_NAMESPACE_PREFIX):
        return []
    return [Error("PORTAL_NAMESPACE_PREFIX must be empty or up to 20 of [a-z0-9-], "
                  "not starting with '-'", id="tenants.E001")]
