"""The clusters' API shapes: what every signed-in caller reads (name, state, the GPU types
offered with their capacity), what admins read besides (where the credentials are, never
what they hold) and write."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from ..models import Cluster

ClusterRow = dict[str, Any]


class ClusterSerializer(serializers.Serializer[ClusterRow]):
    name = serializers.SlugField()
    display_name = serializers.CharField()
    state = serializers.ChoiceField(choices=Cluster.State.choices,
                                    help_text="as the probe last saw it (every 15 s)")
    gpu_types = serializers.DictField(
        child=serializers.IntegerField(),
        help_text="per GPU type slug it offers, the units its nodes have (0 while its "
                  "figures cannot be read)")


class ClusterAdminSerializer(ClusterSerializer):
    """Admins read these besides (absent from everyone else's answers)."""

    home = serializers.BooleanField(required=False,
                                    help_text="the cluster the portal runs beside")
    enabled = serializers.BooleanField(required=False)
    api_server = serializers.CharField(required=False,
                                       help_text="its API server, as its connection names it")
    credentials = serializers.CharField(required=False,
                                        help_text="where its credentials are (never what)")
    kubeconfig_path = serializers.CharField(required=False)
    kubeconfig_secret = serializers.CharField(required=False)
    reason = serializers.CharField(required=False, help_text="why it is unreachable")
    state_since = serializers.DateTimeField(required=False, allow_null=True)
    last_seen = serializers.DateTimeField(required=False, allow_null=True)
    gpu_types_declared = serializers.ListField(
        child=serializers.SlugField(), required=False,
        help_text="the GPU types its admin named (empty: whatever its nodes carry)")


class ClusterWriteSerializer(serializers.Serializer[ClusterRow]):
    """A new cluster (POST: name and one of the credentials required) or changes (PATCH);
    the service checks the fields together (clusters.services.cluster_fields_clean)."""

    name = serializers.CharField(max_length=40)
    display_name = serializers.CharField(max_length=100, allow_blank=True, required=False)
    kubeconfig_path = serializers.CharField(max_length=500, allow_blank=True, required=False,
                                            help_text="an absolute path on the portal's "
                                                      "processes")
    kubeconfig_secret = serializers.CharField(max_length=253, allow_blank=True, required=False,
                                              help_text="namespace/name of a Secret of the "
                                                        "home cluster, key `kubeconfig`")
    gpu_types = serializers.ListField(child=serializers.SlugField(max_length=50),
                                      max_length=64, required=False)
    enabled = serializers.BooleanField(required=False)


class ClusterChangeSerializer(ClusterWriteSerializer):
    name = None  # type: ignore[assignment]  # a cluster's name never changes
