"""Error pages, error reports and log lines never carry a credential (portal/error_reports.py,
portal/errors.py): not the session id, the CSRF token or the Keystone tokens of a signed-in
researcher's page, with DEBUG on as well; an oversized form is 413, not a 400 debug page."""

import logging
import sys

import pytest
from django.test import Client, RequestFactory

from identity import identity as identity_store
from portal.error_reports import (
    SUBSTITUTE,
    PortalExceptionReporter,
    PortalExceptionReporterFilter,
    ScrubSecrets,
)

pytestmark = pytest.mark.django_db

FERNET = "gAAAAABk" + "x1Y-_z" * 30  # shaped like a Keystone token
# built, so that the report's source lines of this file do not hold them
PASSWORD, PLAIN, BEARER = "hunter" + "22", "plain-token-" + "value-123", "bearer-" + "token-456"
SESSION, CSRF = "abcdefgh" + "12345678", "csrf-token-" + "789xyz"


def secrets_of(client: Client) -> list[str]:
    from django.conf import settings

    identity = identity_store.load(client.session)
    return [client.cookies[settings.SESSION_COOKIE_NAME].value, identity.unscoped.id,
            identity.scoped.id]


@pytest.fixture
def researcher(login, gpu_types, cluster):
    client = login("researcher")
    client.raise_request_exception = False
    client.get("/")  # a CSRF cookie too
    return client


@pytest.mark.parametrize("debug", [False, True])
def test_a_failing_page_shows_no_session_or_token(researcher, settings, monkeypatch, debug):
    settings.DEBUG = debug

    def broken(queryset, identity, action="view"):
        raise RuntimeError(f"cannot list for {identity.unscoped.user_name}")

    monkeypatch.setattr("workloads.querysets.WorkloadQuerySet.restrict", broken)
    response = researcher.get("/")
    assert response.status_code == 500
    page = response.content.decode(errors="replace")
    for secret in secrets_of(researcher):
        assert secret not in page
    if debug:
        assert "cannot list for researcher" in page and SUBSTITUTE in page


@pytest.mark.parametrize("debug", [False, True])
def test_an_oversized_form_is_413_or_a_scrubbed_report(researcher, settings, debug):
    settings.DEBUG = debug
    response = researcher.post("/workloads/new/", "name=" + "x" * (
        settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1),
        content_type="application/x-www-form-urlencoded")
    page = response.content.decode(errors="replace")
    for secret in secrets_of(researcher):
        assert secret not in page
    if debug:  # Django's report of the SuspiciousOperation, scrubbed
        assert response.status_code == 400 and "RequestDataTooBig" in page
    else:
        assert response.status_code == 413 and "The request is too large" in page


def test_the_filter_hides_credentials_with_debug_on(settings):
    settings.DEBUG = True
    request = RequestFactory().post(
        "/api/v1/workloads/?token=" + FERNET, {"password": PASSWORD, "name": "n"},
        HTTP_X_AUTH_TOKEN=PLAIN, HTTP_AUTHORIZATION="Bearer " + BEARER,
        HTTP_COOKIE=f"{settings.SESSION_COOKIE_NAME}={SESSION}; csrftoken={CSRF}")
    reporter_filter = PortalExceptionReporterFilter()
    meta = reporter_filter.get_safe_request_meta(request)
    assert meta["HTTP_X_AUTH_TOKEN"] == meta["HTTP_AUTHORIZATION"] == SUBSTITUTE
    assert meta["HTTP_COOKIE"] == SUBSTITUTE and FERNET not in meta["QUERY_STRING"]
    assert set(reporter_filter.get_safe_cookies(request).values()) == {SUBSTITUTE}
    assert reporter_filter.get_post_parameters(request)["password"] == SUBSTITUTE
    assert reporter_filter.get_post_parameters(request)["name"] == "n"
    # a whole report: locals named like credentials, values holding one, the message
    auth_token = PLAIN  # noqa: F841 - a local the report would show
    holder = {"header": "Bearer " + BEARER}  # noqa: F841
    try:
        raise ValueError(f"failed with {FERNET} and {SESSION}")
    except ValueError:
        report = PortalExceptionReporter(request, *sys.exc_info())
        for text in (report.get_traceback_html(), report.get_traceback_text()):
            for secret in (PLAIN, BEARER, SESSION, CSRF, FERNET, PASSWORD):
                assert secret not in text
            assert "failed with" in text and SUBSTITUTE in text


def test_log_lines_and_their_tracebacks_carry_no_token():
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(message)s"))
    try:
        raise RuntimeError(f"Keystone refused {FERNET}")
    except RuntimeError:
        record = logging.LogRecord("portal", logging.ERROR, __file__, 1, "token %s was %s",
                                   (FERNET, "refused"), sys.exc_info())
    assert ScrubSecrets().filter(record)
    line = handler.format(record)
    assert FERNET not in line
    assert f"token {SUBSTITUTE} was refused" in line and "RuntimeError: Keystone refused" in line
    # the portal's log handler has the filter
    from django.conf import settings

    assert "scrub_secrets" in settings.LOGGING["handlers"]["console"]["filters"]
