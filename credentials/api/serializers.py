"""Secret API shapes: what a secret is (name, kind, scope, keys, owner), never what it holds.
`data` is write-only: taken by POST and PUT, in no answer."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from ..models import Secret
from ..validation import MAX_FILES_BYTES, MAX_NAME, SecretInvalid, secret_clean


class SecretSerializer(serializers.ModelSerializer[Secret]):
    owner = serializers.CharField(source="owner.label", help_text="who made it")
    owner_id = serializers.CharField(source="owner.username", help_text="their Keystone user id")
    tenant = serializers.CharField(source="tenant.name")
    keys = serializers.ListField(child=serializers.CharField(),
                                 help_text="the names of what it holds (variables, files, "
                                           "fields); never a value")
    may_change = serializers.SerializerMethodField(
        help_text="whether the caller may replace or delete it")
    state = serializers.ChoiceField(
        choices=["ok", "lost"], read_only=True,
        help_text="lost: its value is gone from the cluster (the project's namespace was made "
                  "again); give it a new value (PUT) before a launch may use it")

    class Meta:
        model = Secret
        fields = ["id", "name", "kind", "scope", "keys", "tenant", "tenant_id", "owner",
                  "owner_id", "created_at", "updated_at", "may_change", "state", "lost_at"]
        read_only_fields = fields

    def get_may_change(self, secret: Secret) -> bool:
        return bool(self.context.get("may_change", {}).get(secret.pk, False))


class SecretDataField(serializers.DictField):
    """A secret's data: names → text values (variables, files' contents, fields)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(child=serializers.CharField(allow_blank=True, trim_whitespace=False,
                                                     max_length=MAX_FILES_BYTES),
                         write_only=True, **kwargs)


class SecretCreateSerializer(serializers.Serializer[dict[str, Any]]):
    name = serializers.CharField(max_length=MAX_NAME)
    kind = serializers.ChoiceField(choices=Secret.Kind.values)
    scope = serializers.ChoiceField(choices=Secret.Scope.values, default=Secret.Scope.USER,
                                    help_text="user: yours alone; project: the project's "
                                              "(its managers write, its members use)")
    def get_fields(self) -> dict[str, serializers.Field[Any, Any, Any, Any]]:
        # `data` is the serializer's own property: the field is added here, not declared
        fields = super().get_fields()
        fields["data"] = SecretDataField(
            help_text="env: {VARIABLE: value}; file: {file name: content}; registry: {server, "
                      "username, password}; s3: {endpoint, bucket, access_key, secret_key, "
                      "region?}")
        return fields

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        try:
            attrs["data"] = secret_clean(name=attrs["name"], kind=attrs["kind"],
                                         data=attrs["data"])
        except SecretInvalid as exc:
            raise serializers.ValidationError(exc.errors) from exc
        return attrs


class SecretReplaceSerializer(serializers.Serializer[dict[str, Any]]):
    def get_fields(self) -> dict[str, serializers.Field[Any, Any, Any, Any]]:
        fields = super().get_fields()
        fields["data"] = SecretDataField(
            help_text="the whole new data, as at creation (it replaces the old)")
        return fields

    def validate_data(self, data: dict[str, str]) -> dict[str, str]:
        try:
            return secret_clean(name=None, kind=self.context["kind"], data=data)
        except SecretInvalid as exc:
            raise serializers.ValidationError(exc.errors["data"]) from exc
