from __future__ import annotations

from typing import Any

from rest_framework import serializers

from ..models import NAME_MAX_LENGTH, StorageClass, Volume
from ..services import MAX_SIZE_GIB


class VolumeSerializer(serializers.ModelSerializer[Volume]):
    owner = serializers.CharField(source="owner.label", help_text="who owns it (a project "
                                  "volume: who made it), with their domain outside the "
                                  "default one")
    owner_id = serializers.CharField(source="owner.username",
                                     help_text="the owner's Keystone user id")
    tenant_id = serializers.IntegerField()
    capacity_gib = serializers.IntegerField(help_text="the size the cluster reports for its "
                                                      "claim (0: not bound yet)")

    class Meta:
        model = Volume
        fields = ["id", "name", "scope", "owner", "owner_id", "tenant_id", "size_gib",
                  "capacity_gib", "storage_class", "claim_name", "state", "reason",
                  "created_at", "updated_at"]
        read_only_fields = fields


class VolumeCreateSerializer(serializers.Serializer[dict[str, Any]]):
    name = serializers.CharField(max_length=NAME_MAX_LENGTH)
    size_gib = serializers.IntegerField(min_value=1, max_value=MAX_SIZE_GIB)
    scope = serializers.ChoiceField(choices=Volume.Scope.choices, default=Volume.Scope.USER,
                                    help_text="user: yours (and the managers'); project: "
                                              "every member's to mount (managers make them)")
    storage_class = serializers.CharField(
        max_length=253, required=False, allow_blank=True,
        help_text="one of the storage classes offered (GET storage-classes/); default: the "
                  "admin's default class")


class VolumeGrowSerializer(serializers.Serializer[dict[str, Any]]):
    size_gib = serializers.IntegerField(min_value=1, max_value=MAX_SIZE_GIB,
                                        help_text="the new size: only larger, and only where "
                                                  "the volume's class can grow in place")


class StorageClassSerializer(serializers.ModelSerializer[StorageClass]):
    class Meta:
        model = StorageClass
        fields = ["name", "description", "expandable", "is_default"]
        read_only_fields = fields
