"""The file browser's forms: each names paths inside the volume, bounded as the API's are."""

from __future__ import annotations

from typing import Any

from django import forms

MAX_PATH = 4096


class PathField(forms.CharField):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(max_length=MAX_PATH, strip=False, **kwargs)

    def clean(self, value: Any) -> str:
        text: str = super().clean(value)
        if "\x00" in text:
            raise forms.ValidationError("A path holds no NUL character.")
        return text


class FolderForm(forms.Form):
    path = PathField()


class MoveForm(forms.Form):
    source = PathField()
    to = PathField()


class DeleteForm(forms.Form):
    path = PathField()
    recursive = forms.BooleanField(required=False)
