"""The portal on the two real control planes (tests/support/multicluster.py)."""

from tests.support.multicluster import portal  # noqa: F401 - a fixture
