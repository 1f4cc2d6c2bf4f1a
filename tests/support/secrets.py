"""Secrets made through the API, for the tests of secrets and of launches that read them."""

from __future__ import annotations

from django.test import Client

# a value that must be found nowhere but in the namespace's Secret
VALUE = "hf_s3cr3t-value-that-must-stay-hidden"


def secret_made(headers: dict, name: str = "hf", *, kind: str = "env", scope: str = "user",
                data: dict | None = None) -> int:
    """A secret made through the API (201); its id."""
    body = {"name": name, "kind": kind, "scope": scope,
            "data": data if data is not None else {"HF_TOKEN": VALUE}}
    response = Client().post("/api/v1/secrets/", body, content_type="application/json",
                             **headers)
    assert response.status_code == 201, response.json()
    return response.json()["id"]
