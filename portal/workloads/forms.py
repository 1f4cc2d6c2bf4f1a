"""The launch page's form fields → the launch request `LaunchSerializer` validates.

The page has text areas where the API has lists and maps: a command or its arguments one per
line (each line one argv item, never passed through a shell) and environment variables as
KEY=value lines. Everything else is passed on as typed; the serializer decides, so the page and
the API accept and refuse the same requests.
"""

from __future__ import annotations

from typing import Any

from catalogue.fields import argv_lines, env_lines
from catalogue.models import Template

# the form's fields in page order, with their labels (the error summary links to them)
FIELD_LABELS = {
    "name": "Name", "template": "Template", "gpu_type": "GPU type", "gpu_count": "GPUs",
    "cpu": "CPU cores", "memory": "Memory (GiB)", "max_runtime_minutes": "Maximum runtime",
    "use_home": "Home volume", "kind": "Kind", "image": "Image", "command": "Command",
    "args": "Arguments", "env": "Environment", "port": "Port", "retries": "Retries",
    "public": "Public",
}

# fields the page always sends (blank numbers are left out so the template defaults apply)
COMMON_FIELDS = ("name", "template", "gpu_type", "gpu_count")
OPTIONAL_NUMBERS = ("cpu", "memory", "max_runtime_minutes")
# fields only the custom template shows
CUSTOM_TEXT_FIELDS = ("kind", "image", "port", "retries")


def launch_request(post, template: Template | None) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """The submitted form → (data for LaunchSerializer, errors found while reading the form)."""
    data: dict[str, Any] = {field: post.get(field, "").strip() for field in COMMON_FIELDS}
    errors: dict[str, list[str]] = {}
    for field in OPTIONAL_NUMBERS:
        value = post.get(field, "").strip()
        if value:
            data[field] = value
    data["use_home"] = bool(post.get("use_home"))
    data["public"] = bool(post.get("public"))
    if template is not None and template.image_replaceable and not template.custom:
        image = post.get("image", "").strip()
        if image:  # blank: the template's own
            data["image"] = image
    if template is not None and template.custom:
        for field in CUSTOM_TEXT_FIELDS:
            value = post.get(field, "").strip()
            if value:
                data[field] = value
        data["command"] = argv_lines(post.get("command", ""))
        data["args"] = argv_lines(post.get("args", ""))
        env, env_errors = env_lines(post.get("env", ""))
        data["env"] = env
        if env_errors:
            errors["env"] = env_errors
    return data, errors


def flat_errors(detail: Any) -> dict[str, list[str]]:
    """DRF's error detail → {field: [message, …]}; an argv item's error names its line."""
    result: dict[str, list[str]] = {}
    for field, value in dict(detail).items():
        key = "form" if field == "non_field_errors" else str(field)
        result[key] = _messages(value)
    return result


def _messages(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [f"Line {int(index) + 1}: {message}" if str(index).isdigit() else
                f"{index}: {message}"
                for index, inner in value.items() for message in _messages(inner)]
    if isinstance(value, list | tuple):
        return [message for item in value for message in _messages(item)]
    return [str(value)]
