"""The Secrets page's forms: a secret's data from the page's fields, by kind, checked by the one
validation (validation.py) the API's serializers wrap too. A value typed here is sent once and
never shown again: no field is ever filled back in (PasswordInput and text areas rendered empty,
whatever was posted)."""

from __future__ import annotations

from typing import Any

from django import forms

from catalogue.fields import env_lines

from .models import Secret
from .validation import MAX_FILE_NAME, MAX_FILES_BYTES, MAX_NAME, SecretInvalid, secret_clean


class BlankTextarea(forms.Textarea):
    """A text area that never renders a value: a page sent back with an error is no place for
    a secret typed into it."""

    def format_value(self, value: Any) -> str | None:
        return None


class BlankTextInput(forms.TextInput):
    def format_value(self, value: Any) -> str | None:
        return None


def _secret_text(label: str, **attrs: Any) -> forms.CharField:
    """A field for a value: never rendered back with what was posted."""
    return forms.CharField(label=label, required=False, strip=False,
                           max_length=MAX_FILES_BYTES,
                           widget=BlankTextarea(attrs={"rows": 4, "autocomplete": "off",
                                                       "spellcheck": "false", **attrs}))


def _password(label: str) -> forms.CharField:
    return forms.CharField(label=label, required=False, strip=False, max_length=4096,
                           widget=forms.PasswordInput(render_value=False,
                                                      attrs={"autocomplete": "off"}))


class SecretDataForm(forms.Form):
    """The data of a secret of `kind`, as the page's fields give it; `data` once clean."""

    env = _secret_text("Variables", placeholder="HF_TOKEN=…")
    file_name = forms.CharField(label="File name", required=False, max_length=MAX_FILE_NAME)
    file_content = _secret_text("Content")
    server = forms.CharField(label="Registry", required=False, max_length=253,
                             help_text="its host name, e.g. registry.example.org")
    username = forms.CharField(label="User name", required=False, max_length=4096,
                               widget=BlankTextInput(attrs={"autocomplete": "off"}))
    password = _password("Password or token")
    endpoint = forms.CharField(label="Endpoint", required=False, max_length=4096,
                               help_text="the S3 server's URL")
    bucket = forms.CharField(label="Bucket", required=False, max_length=63)
    access_key = forms.CharField(label="Access key", required=False, max_length=4096,
                                 widget=BlankTextInput(attrs={"autocomplete": "off"}))
    secret_key = _password("Secret key")
    region = forms.CharField(label="Region", required=False, max_length=32,
                             help_text="optional, e.g. us-east-1")

    def __init__(self, *args: Any, kind: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fixed_kind = kind
        self.data_clean: dict[str, str] = {}

    def kind_of(self, cleaned: dict[str, Any]) -> str:
        return self.fixed_kind or str(cleaned.get("kind") or "")

    def given(self, kind: str, cleaned: dict[str, Any]) -> Any:
        """The data as the API would take it."""
        if kind == Secret.Kind.ENV:
            env, problems = env_lines(cleaned.get("env") or "")
            if problems:
                self.add_error("env", problems)
            return env
        if kind == Secret.Kind.FILE:
            return {cleaned.get("file_name") or "": cleaned.get("file_content") or ""}
        fields = (("server", "username", "password") if kind == Secret.Kind.REGISTRY else
                  ("endpoint", "bucket", "access_key", "secret_key", "region"))
        return {field: cleaned.get(field) or "" for field in fields if cleaned.get(field)}

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        kind = self.kind_of(cleaned)
        if self.errors or not kind:
            return cleaned
        data = self.given(kind, cleaned)
        if self.errors:
            return cleaned
        try:
            self.data_clean = secret_clean(name=cleaned.get("name") if not self.fixed_kind else None,
                                           kind=kind, data=data)
        except SecretInvalid as exc:
            for field, messages in exc.errors.items():
                self.add_error(field if field in self.fields else None, messages)
        return cleaned


class SecretForm(SecretDataForm):
    """A new secret: its name, kind and scope, and its data."""

    name = forms.CharField(label="Name", max_length=MAX_NAME,
                           help_text="lower-case letters, digits and hyphens, e.g. hf-token")
    kind = forms.ChoiceField(label="Kind", choices=Secret.Kind.choices)
    scope = forms.ChoiceField(label="Whose", choices=Secret.Scope.choices,
                              initial=Secret.Scope.USER)

    field_order = ["name", "kind", "scope"]
