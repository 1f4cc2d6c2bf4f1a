"""The tenants' tests' fixtures (tests/support/provisioning.py)."""

from tests.support.provisioning import tenant  # noqa: F401 - a fixture
