from __future__ import annotations

from typing import Any

from rest_framework import serializers

from api.fields import WholeNumberField

from ..models import DATASET_NAME_MAX_LENGTH, NAME_MAX_LENGTH, Dataset, StorageClass, Volume
from ..services import MAX_SIZE_GIB
from ..validation import MAX_PATH


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
    size_gib = WholeNumberField(min_value=1, max_value=MAX_SIZE_GIB)
    scope = serializers.ChoiceField(choices=Volume.Scope.choices, default=Volume.Scope.USER,
                                    help_text="user: yours (and the managers'); project: "
                                              "every member's to mount (managers make them)")
    storage_class = serializers.CharField(
        max_length=253, required=False, allow_blank=True,
        help_text="one of the storage classes offered (GET storage-classes/); default: the "
                  "admin's default class")


class VolumeGrowSerializer(serializers.Serializer[dict[str, Any]]):
    size_gib = WholeNumberField(min_value=1, max_value=MAX_SIZE_GIB,
                                        help_text="the new size: only larger, and only where "
                                                  "the volume's class can grow in place")


class StorageClassSerializer(serializers.ModelSerializer[StorageClass]):
    class Meta:
        model = StorageClass
        fields = ["name", "description", "expandable", "is_default"]
        read_only_fields = fields


class DatasetSerializer(serializers.ModelSerializer[Dataset]):
    """A dataset as its projects' people see it: always read-only."""

    read_only = serializers.SerializerMethodField(  # type: ignore[assignment] # Field's name
        help_text="always true: a launch mounts a dataset read-only")
    default_path = serializers.CharField(help_text="where a launch that names no path mounts "
                                                   "it")

    class Meta:
        model = Dataset
        fields = ["id", "name", "description", "kind", "size_gib", "read_only",
                  "default_path", "created_at", "updated_at"]
        read_only_fields = fields

    def get_read_only(self, dataset: Dataset) -> bool:
        return True


class DatasetProjectSerializer(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    name = serializers.CharField()


class DatasetAdminSerializer(DatasetSerializer):
    """A dataset as admins see it: where its data is and who it is open to."""

    source = serializers.JSONField(  # type: ignore[assignment] # named like Field's
        help_text="the kind's fields (a PersistentVolume's: its "
                                             "name and the source copied from it)")
    projects = DatasetProjectSerializer(source="tenants", many=True,
                                        help_text="the projects it is open to (none when "
                                                  "open_to_all)")

    class Meta(DatasetSerializer.Meta):
        fields = [*DatasetSerializer.Meta.fields, "source", "open_to_all", "projects"]
        read_only_fields = fields


class DatasetSourceFields(serializers.Serializer[dict[str, Any]]):
    """The source's fields, each of one kind (storage/validation.py checks them)."""

    persistent_volume = serializers.CharField(
        max_length=253, required=False, help_text="pv: the PersistentVolume's name (its "
                                                  "source is copied for each project)")
    server = serializers.CharField(max_length=253, required=False,
                                   help_text="nfs: the server's host name or address")
    path = serializers.CharField(max_length=MAX_PATH, required=False,
                                 help_text="nfs: the exported path")
    driver = serializers.CharField(max_length=63, required=False,
                                   help_text="csi: the CSI driver's name")
    volume_handle = serializers.CharField(max_length=MAX_PATH, required=False,
                                          help_text="csi: the driver's volume handle")
    volume_attributes = serializers.DictField(
        child=serializers.CharField(max_length=MAX_PATH, allow_blank=True), required=False,
        help_text="csi: the driver's volume attributes")
    endpoint = serializers.CharField(max_length=253, required=False,
                                     help_text="s3: the S3 service's URL")
    bucket = serializers.CharField(max_length=63, required=False, help_text="s3: the bucket")
    prefix = serializers.CharField(max_length=MAX_PATH, required=False, allow_blank=True,
                                   help_text="s3: the key prefix inside the bucket")
    region = serializers.CharField(max_length=32, required=False, allow_blank=True,
                                   help_text="s3: the bucket's region")


class DatasetCreateSerializer(DatasetSourceFields):
    name = serializers.CharField(max_length=DATASET_NAME_MAX_LENGTH)
    description = serializers.CharField(max_length=500, required=False, allow_blank=True)
    kind = serializers.ChoiceField(choices=Dataset.Kind.choices)
    size_gib = WholeNumberField(min_value=1, max_value=MAX_SIZE_GIB)
    open_to_all = serializers.BooleanField(required=False, default=False,
                                           help_text="open to every project")
    projects = serializers.ListField(
        child=WholeNumberField(min_value=1, max_value=2**63 - 1), required=False,
        max_length=1000, help_text="the ids of the projects (tenants) it is open to")


class DatasetUpdateSerializer(serializers.Serializer[dict[str, Any]]):
    name = serializers.CharField(max_length=DATASET_NAME_MAX_LENGTH, required=False)
    description = serializers.CharField(max_length=500, required=False, allow_blank=True)
    size_gib = WholeNumberField(min_value=1, max_value=MAX_SIZE_GIB, required=False)
    open_to_all = serializers.BooleanField(required=False)
    projects = serializers.ListField(
        child=WholeNumberField(min_value=1, max_value=2**63 - 1), required=False,
        max_length=1000, help_text="the projects it is open to, whole (closing it to one "
                                   "where a live workload mounts it: 409 dataset_in_use)")
