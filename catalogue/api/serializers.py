"""Catalogue API shapes: a GPU type with the cluster's live capacity, a template."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from ..models import Template
from ..sharing import SHARINGS

# a GPU type's row, as catalogue/api/views.py builds it: the type and its live capacity
GpuTypeRow = dict[str, object]


class CapacityChangeSerializer(serializers.Serializer[Any]):
    at = serializers.DateTimeField()
    free = serializers.IntegerField(help_text="GPUs free from then, as far as the calendar "
                                              "changes it")
    why = serializers.CharField(help_text="maintenance, reserved, maintenance ends, "
                                          "reservation ends")


class UpcomingSerializer(serializers.Serializer[Any]):
    free_now = serializers.IntegerField()
    changes = CapacityChangeSerializer(many=True)
    text = serializers.CharField(help_text="\"4 a100 free now, 0 from 14:00 (maintenance)\"")


class ClusterFiguresSerializer(serializers.Serializer[dict[str, int]]):
    capacity = serializers.IntegerField(help_text="units its nodes have")
    free = serializers.IntegerField(help_text="units free there now")


class GpuTypeSerializer(serializers.Serializer[GpuTypeRow]):
    """A GPU type with the cluster's live capacity (null when the cluster is unreachable)."""

    slug = serializers.SlugField()
    name = serializers.CharField()
    resource_name = serializers.CharField()
    node_selector = serializers.DictField(child=serializers.CharField())
    memory_gb = serializers.IntegerField()
    sharing = serializers.ChoiceField(
        choices=list(SHARINGS), help_text="how one unit shares its physical GPU: exclusive (a "
                                          "whole GPU), time-sliced (replicas), mig (a slice), "
                                          "dra (a device claimed through resource.k8s.io/v1 "
                                          "from NVIDIA's DRA driver)")
    gpu_fraction = serializers.FloatField(
        help_text="the part of one physical GPU one unit is (1, 0.25, 0.142857…); totals, "
                  "budgets and GPU-hours count units × this")
    gpu_fraction_text = serializers.CharField(help_text="the same, exactly: \"1\", \"1/4\", "
                                                        "\"1/7\"")
    physical = serializers.SlugField(allow_null=True,
                                     help_text="the slug of the whole-GPU type it is carved from")
    device_class = serializers.CharField(
        allow_null=True, help_text="a dra type's own DeviceClass, which its claims name (NVIDIA's "
                                   "driver's class narrowed to its product and memory: "
                                   "\"a100-dra.gpu-portal.io\"); null for every other type")
    mig_profile = serializers.CharField(
        allow_null=True, help_text="a dra type of MIG instances: the profile its devices carry "
                                   "(\"1g.10gb\"), which its fraction and memory name; null "
                                   "for every other type")
    quota_resource = serializers.CharField(
        help_text="what its units are counted under in a project's ResourceQuota and Kueue's "
                  "queues: its resource, or a dra type's own class's devices "
                  "(\"a100-dra.gpu-portal.io.deviceclass.resource.k8s.io/devices\")")
    capacity = serializers.IntegerField(allow_null=True,
                                        help_text="units the nodes have (GPUs, or the shared "
                                                  "type's replicas or slices; a dra type's: the "
                                                  "devices the cluster's ResourceSlices publish "
                                                  "that its claims can be given)")
    allocatable = serializers.IntegerField(allow_null=True,
                                           help_text="GPUs the nodes offer (healthy, schedulable)")
    allocated = serializers.IntegerField(
        allow_null=True, help_text="GPUs that running pods hold (a dra type's: the devices that "
                                   "ResourceClaims' allocations hold)")
    free = serializers.IntegerField(allow_null=True,
                                    help_text="allocatable less the portal's active workloads")
    largest_node = serializers.IntegerField(allow_null=True)
    largest_free_block = serializers.IntegerField(
        allow_null=True, help_text="the most GPUs free on one node: the largest request that fits now")
    nodes = serializers.IntegerField(allow_null=True)
    clusters = serializers.DictField(
        child=ClusterFiguresSerializer(),
        help_text="per cluster that offers it (by name), its capacity and free units there; "
                  "a cluster that is disabled or does not answer is left out (the figures "
                  "above are the home cluster's)")
    upcoming = UpcomingSerializer(
        allow_null=True, help_text="the calendar's changes to the free GPUs in the next 24 hours "
                                   "(maintenance windows, other projects' reservations)")


class TemplateSerializer(serializers.ModelSerializer[Template]):
    cpu = serializers.IntegerField(source="default_cpu")
    memory = serializers.IntegerField(source="default_memory_gb")
    image_replaceable = serializers.BooleanField(
        source="takes_image", help_text="whether a launch may give an image of its own (from "
                                        "the allowed registries); otherwise `image` runs")

    class Meta:
        model = Template
        fields = ["slug", "name", "description", "kind", "custom", "image",
                  "image_replaceable", "allowed_args", "port", "cpu", "memory"]
        extra_kwargs = {"allowed_args": {"help_text": (
            "the options a launch's `args` may hold (NAME or NAME=value each), appended to the "
            "template's own arguments; empty: none. The custom template takes any `args`")}}
        read_only_fields = fields
