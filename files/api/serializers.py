from __future__ import annotations

from typing import Any

from rest_framework import serializers

MAX_PATH = 4096  # what Linux takes as a path


class PathField(serializers.CharField):
    """A path inside a volume, as the caller writes it: the file server judges whether it
    stays inside; here only its size and characters are bounded."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(max_length=MAX_PATH, trim_whitespace=False, **kwargs)

    def to_internal_value(self, data: Any) -> str:
        value: str = super().to_internal_value(data)
        if "\x00" in value:
            raise serializers.ValidationError("A path holds no NUL character.")
        return value


class EntrySerializer(serializers.Serializer[dict[str, Any]]):
    name = serializers.CharField()
    type = serializers.ChoiceField(choices=["file", "directory", "link", "other"])
    size = serializers.IntegerField()
    modified = serializers.DateTimeField()


class ListQuerySerializer(serializers.Serializer[dict[str, Any]]):
    path = PathField(required=False, allow_blank=True, default="")


class FileQuerySerializer(serializers.Serializer[dict[str, Any]]):
    path = PathField()


class DeleteQuerySerializer(FileQuerySerializer):
    recursive = serializers.BooleanField(required=False, default=False)


class FolderSerializer(serializers.Serializer[dict[str, Any]]):
    path = PathField()


class MoveSerializer(serializers.Serializer[dict[str, Any]]):
    """{from, to}: `from` is a keyword of Python's, so the fields are named here."""

    def get_fields(self) -> dict[str, serializers.Field[Any, Any, Any, Any]]:
        return {"from": PathField(), "to": PathField()}
