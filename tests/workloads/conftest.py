"""The workloads' tests' fixtures (tests/support/): vision-lab for the pages and the API, and
tenants and owners for the tracker's tests. A module's own fixture of the same name wins."""

from tests.support.journeys import vision  # noqa: F401 - a fixture
from tests.support.pages import researcher, vision_lab  # noqa: F401 - fixtures
from tests.support.tracking import owner, tenants  # noqa: F401 - fixtures
