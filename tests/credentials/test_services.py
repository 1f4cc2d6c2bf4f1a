"""The secrets' services: an error report of a write that failed (the DEBUG page, the admins'
e-mail) shows none of the values the write was given."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from credentials.services import secret_create, secret_replace
from kube.client import KubeError
from portal.error_reports import PortalExceptionReporter
from tests.support.secrets import VALUE

pytestmark = pytest.mark.django_db


def report_of(call) -> str:
    try:
        call()
    except KubeError:
        reporter = PortalExceptionReporter(None, *sys.exc_info())
        return reporter.get_traceback_text() + reporter.get_traceback_html()
    raise AssertionError("the write did not fail")


def test_the_error_report_of_a_failed_write_holds_no_value(vision, cluster, settings, tmp_path):
    researcher = get_user_model().objects.get(name="researcher")
    secret = secret_create(tenant=vision, acting_user=researcher, name="kept", kind="env",
                           scope="user", data={"HF_TOKEN": "first"})
    dead = tmp_path / "dead-kubeconfig"
    dead.write_text(Path(cluster.kubeconfig).read_text().replace(cluster.url,
                                                                 "http://127.0.0.1:9"))
    settings.KUBECONFIG = str(dead)
    created = report_of(lambda: secret_create(
        tenant=vision, acting_user=researcher, name="hf", kind="s3", scope="user",
        data={"endpoint": "https://s3.example.org", "bucket": "data", "access_key": "a",
              "secret_key": VALUE}))
    replaced = report_of(lambda: secret_replace(secret=secret, acting_user=researcher,
                                                data={"HF_TOKEN": VALUE}))
    for function, report in (("secret_create", created), ("secret_replace", replaced)):
        assert function in report and "KubeUnavailable" in report
        assert VALUE not in report
