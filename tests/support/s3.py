"""The S3 server of the tests (stack/s3.py: versitygw on loopback over a temporary folder), one
per test session, started only by the tests that ask for `s3_server`; and a bucket with an
object in it, made with the server's root key pair as a site's storage team would."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterator

import pytest

from stack.s3 import S3Server

OBJECT_KEY = "imagenet/README.txt"
OBJECT_BODY = b"a few words that stand for a data set\n"


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory) -> Iterator[S3Server]:
    server = S3Server(tmp_path_factory.mktemp("s3")).start()
    yield server
    server.stop()


def s3_client(endpoint: str | None = None, access_key: str | None = None,
              secret_key: str | None = None, region: str | None = None):
    """A boto3 S3 client; what is not given, boto3 finds where it always does (the AWS_*
    variables of the environment)."""
    import boto3
    from botocore.config import Config

    return boto3.session.Session().client(
        "s3", endpoint_url=endpoint, aws_access_key_id=access_key,
        aws_secret_access_key=secret_key, region_name=region,
        config=Config(retries={"max_attempts": 1}, s3={"addressing_style": "path"}))


@dataclasses.dataclass(frozen=True)
class Bucket:
    name: str
    key: str
    body: bytes


@pytest.fixture
def s3_bucket(s3_server: S3Server) -> Bucket:
    """A bucket of this test's own holding OBJECT_KEY."""
    root = s3_client(s3_server.endpoint, s3_server.access_key, s3_server.secret_key,
                     s3_server.region)
    name = f"lake-{uuid.uuid4().hex[:10]}"
    root.create_bucket(Bucket=name)
    root.put_object(Bucket=name, Key=OBJECT_KEY, Body=OBJECT_BODY)
    return Bucket(name=name, key=OBJECT_KEY, body=OBJECT_BODY)
