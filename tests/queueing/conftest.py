"""Queueing's tests' fixtures (tests/support/kueue.py)."""

from tests.support.kueue import queued_cluster  # noqa: F401 - a fixture
