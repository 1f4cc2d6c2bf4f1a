"""The secrets' tests' fixtures (tests/support/): vision-lab provisioned in kubesim, its people's
API headers and signed-in browsers."""

from tests.support.journeys import vision  # noqa: F401 - a fixture
from tests.support.pages import researcher, vision_lab  # noqa: F401 - fixtures
