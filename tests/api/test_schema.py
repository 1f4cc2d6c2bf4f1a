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


DATA_OPERATIONS = [
    ("get", "/api/v1/volumes/"), ("post", "/api/v1/volumes/"), ("get", "/api/v1/volumes/{id}/"),
    ("patch", "/api/v1/volumes/{id}/"), ("delete", "/api/v1/volumes/{id}/"),
    ("get", "/api/v1/volumes/{id}/files/"), ("get", "/api/v1/volumes/{id}/files/content"),
    ("put", "/api/v1/volumes/{id}/files/content"), ("delete", "/api/v1/volumes/{id}/files/content"),
    ("post", "/api/v1/volumes/{id}/files/folders/"), ("post", "/api/v1/volumes/{id}/files/moves/"),
    ("get", "/api/v1/storage-classes/"), ("get", "/api/v1/secrets/"), ("post", "/api/v1/secrets/"),
    ("get", "/api/v1/secrets/{id}/"), ("put", "/api/v1/secrets/{id}/"),
    ("delete", "/api/v1/secrets/{id}/"), ("get", "/api/v1/datasets/"),
    ("post", "/api/v1/datasets/"), ("get", "/api/v1/datasets/{id}/"),
    ("patch", "/api/v1/datasets/{id}/"), ("delete", "/api/v1/datasets/{id}/"),
    ("post", "/api/v1/workloads/"), ("post", "/api/v1/workloads/check/"),
]


@pytest.mark.django_db
def test_every_error_answer_is_described_in_the_one_error_shape():
    """Also the errors a view documents by a description alone (the file API's path_outside,
    volume_not_bound, a Range outside the file): a client reads each as {code, category, …}."""
    body = Client().get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    shape = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    for path, operations in body["paths"].items():
        for method, operation in operations.items():
            for status, response in operation.get("responses", {}).items():
                if int(status) >= 400:
                    assert response.get("content") == shape, (method, path, status)


@pytest.mark.django_db
@pytest.mark.parametrize(("method", "path"), DATA_OPERATIONS)
def test_each_data_operation_documents_its_refusals(method, path):
    body = Client().get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    answers = body["paths"][path][method]["responses"]
    assert {"400", "401", "403", "404"} <= set(answers), answers.keys()
    if "/files/" in path:  # a volume whose storage is not there yet
        assert "409" in answers
