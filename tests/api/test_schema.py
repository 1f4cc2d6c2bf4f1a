import pytest
from django.core.management import call_command
from django.test import Client


def test_the_schema_generates_without_warnings(tmp_path):
    out = tmp_path / "schema.yaml"
    call_command("spectacular", "--fail-on-warn", "--file", str(out))
    text = out.read_text()
    for path in ("/api/v1/workloads/", "/api/v1/workloads/{id}/stop/", "/api/v1/gpu-types/",
                 "/api/v1/templates/", "/api/v1/tenants/{id}/quota/", "/api/v1/audit/"):
        assert f"  {path}:" in text, path


@pytest.mark.django_db
def test_the_schema_is_served_without_a_token():
    response = Client().get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    body = response.json()
    assert body["openapi"].startswith("3.")
    assert "keystoneToken" in body["components"]["securitySchemes"]
