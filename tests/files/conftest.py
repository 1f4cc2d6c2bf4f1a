"""The file tests' fixtures (tests/support/gpuctl.py)."""

from tests.support.gpuctl import portal  # noqa: F401 - a fixture
