"""Whether an S3 dataset's bucket answers where the admin says it is, asked once when it is
published: a mistyped endpoint or bucket is said then, in the form, rather than found by every
pod that mounts it (a mount that fails on the node, or a job that reads nothing).

The portal holds no key for the bucket (the CSI driver that mounts it has its own), so it asks
as anyone may: `HEAD /<bucket>` on the endpoint, path-style, without a signature. S3 services
answer that with 404 where there is no such bucket and with 403 (or 200 for a public bucket, or
301 where it lives in another region) where there is one; either of the last tells that the
bucket is there, which is all that is asked. No answer at all, a 404, or a server error refuses
the publication."""

from __future__ import annotations

import functools
import ssl
import urllib.parse

import httpx
from django.conf import settings

from .validation import DatasetInvalid


@functools.cache
def _tls() -> ssl.SSLContext:
    """The system's trusted certificates, made once."""
    return ssl.create_default_context()


def bucket_answers(endpoint: str, bucket: str, *,
                   transport: httpx.BaseTransport | None = None) -> None:
    """Raise DatasetInvalid unless `endpoint` answers for `bucket` as an S3 service with that
    bucket does (within PORTAL_S3_PROBE_SECONDS)."""
    timeout = settings.PORTAL_S3_PROBE_SECONDS
    url = f"{endpoint.rstrip('/')}/{urllib.parse.quote(bucket)}"
    try:
        with httpx.Client(transport=transport, verify=_tls(), follow_redirects=False) as client:
            answer = client.head(url, timeout=timeout)
    except httpx.TimeoutException as exc:
        raise DatasetInvalid({"endpoint": [
            f"{endpoint} did not answer within {timeout:g} s."]}) from exc
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        raise DatasetInvalid({"endpoint": [
            f"{endpoint} could not be reached ({type(exc).__name__})."]}) from exc
    if answer.status_code == 404:
        raise DatasetInvalid({"bucket": [f"{endpoint} has no bucket {bucket!r}."]})
    if answer.status_code >= 500:
        raise DatasetInvalid({"endpoint": [
            f"{endpoint} answered {answer.status_code} for the bucket {bucket!r}: try again "
            "once it is well."]})
