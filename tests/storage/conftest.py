"""The storage tests' fixtures: a tenant of its own per test (tests/support/provisioning.py),
and vision-lab with a signed-in researcher for the pages (tests/support/pages.py)."""

from tests.support.pages import admin, researcher, vision_lab  # noqa: F401 - fixtures
from tests.support.provisioning import tenant  # noqa: F401 - a fixture
from tests.support.s3 import s3_bucket, s3_server  # noqa: F401 - fixtures
