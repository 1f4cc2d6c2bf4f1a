"""The secrets' tests' fixtures (tests/support/): vision-lab provisioned in kubesim, its people's
API headers and signed-in browsers; the S3 server on loopback and a bucket on it; the private
registries on loopback."""

from tests.support.journeys import vision  # noqa: F401 - a fixture
from tests.support.pages import researcher, vision_lab  # noqa: F401 - fixtures
from tests.support.registry import (  # noqa: F401 - fixtures
    htpasswd_registry,
    registries_allowed,
    token_registry,
)
from tests.support.s3 import s3_bucket, s3_server  # noqa: F401 - fixtures
