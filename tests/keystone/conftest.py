import pytest
from django.test import Client


@pytest.fixture
def login(keystone, db):
    """Log a user in through the real login form; returns the Django test client."""

    def _login(username: str, password: str | None = None, client: Client | None = None,
               domain: str = "Default"):
        client = client or Client()
        response = client.post("/login/", {"username": username,
                                           "password": password or f"{username}-demo-pass",
                                           "domain": domain})
        assert response.status_code == 302, response.content[:2000]
        return client

    return _login
