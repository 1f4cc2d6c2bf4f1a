"""gpuctl's tests' fixtures (tests/support/gpuctl.py)."""

from tests.support.gpuctl import portal  # noqa: F401 - a fixture
from tests.support.registry import (  # noqa: F401 - fixtures
    htpasswd_registry,
    registries_allowed,
    token_registry,
)
