"""The catalogue's page tests' fixtures (tests/support/pages.py)."""

from tests.support.pages import admin  # noqa: F401 - a fixture
