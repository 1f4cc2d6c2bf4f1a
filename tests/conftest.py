import pytest

pytest_plugins = ["tests.fixtures.stack", "tests.fixtures.kubesim", "tests.fixtures.realcluster",
                  "tests.fixtures.portal"]


def pytest_configure(config) -> None:
    # here, not in tests/conformance/conftest.py: under pytest-xdist only this conftest is loaded
    # by the controller, which receives every worker's reports and prints the score
    from tests.conformance.score import Tally

    config.pluginmanager.register(Tally(), "conformance-tally")


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    """The test database as the migrations left it, serialized once: what a transactional
    test's flush removes is put back from it (tests/fixtures/portal.py)."""
    from django.db import connections

    with django_db_blocker.unblock():
        connection = connections["default"]
        if not hasattr(connection, "_test_serialized_contents"):
            connection._test_serialized_contents = connection.creation.serialize_db_to_string()
