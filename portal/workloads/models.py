"""The GPU type catalogue (and, with the workloads issue, templates and workloads)."""

from django.core.validators import RegexValidator
from django.db import models

# a Kubernetes extended resource name: nvidia.com/gpu, nvidia.com/mig-1g.10gb, amd.com/gpu …
RESOURCE_NAME = RegexValidator(
    r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[a-z0-9]([-a-z0-9._]*[a-z0-9])?$",
    "Use a Kubernetes extended resource name such as nvidia.com/gpu.",
)


class GpuType(models.Model):
    """A kind of GPU researchers can ask for, placed by node selector labels."""

    slug = models.SlugField(max_length=40, unique=True)
    name = models.CharField(max_length=120)
    resource_name = models.CharField(max_length=120, default="nvidia.com/gpu",
                                     validators=[RESOURCE_NAME])
    node_selector = models.JSONField(default=dict, blank=True,
                                     help_text="Node labels a node must carry, e.g. {\"gputype\": \"a100\"}")
    memory_gb = models.PositiveIntegerField(default=0)
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.name
