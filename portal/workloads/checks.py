"""System checks of the workload settings: a site-wide registry list with a typo would refuse
every image (image_allowed never matches an invalid entry); say so at start-up instead."""

from django.conf import settings
from django.core.checks import Error, register

from catalogue.images import validate_image_prefix


@register()
def image_registries_valid(app_configs, **kwargs):
    errors = []
    for entry in settings.PORTAL_IMAGE_REGISTRIES:
        try:
            validate_image_prefix(entry)
        except ValueError as exc:
            errors.append(Error(f"PORTAL_IMAGE_REGISTRIES: {exc}",
                                hint="Registries or repository prefixes, comma-separated, "
                                     "e.g. nvcr.io/nvidia,quay.io/jupyter.",
                                id="workloads.E001"))
    return errors
