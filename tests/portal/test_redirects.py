"""The `next` of a form post or the login page leads back into the portal, never elsewhere."""

import pytest
from django.test import RequestFactory

from core.redirects import safe_redirect_target


@pytest.mark.parametrize("candidate, expected", [
    ("/workloads/?mine=true", "/workloads/?mine=true"),
    ("http://testserver/workloads/", "http://testserver/workloads/"),
    ("https://evil.example/", None),
    ("//evil.example/workloads/", None),
    ("javascript:alert(1)", None),
    ("", None),
    (None, None),
])
def test_only_targets_inside_the_portal_are_followed(candidate, expected):
    request = RequestFactory().post("/workloads/1/stop/")
    assert safe_redirect_target(request, candidate) == expected
