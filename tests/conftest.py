pytest_plugins = ["tests.fixtures.stack", "tests.fixtures.kubesim", "tests.fixtures.realcluster",
                  "tests.fixtures.multicluster",
                  "tests.fixtures.portal", "tests.fixtures.database", "tests.fixtures.scheduling",
                  "tests.fixtures.builds"]


def pytest_configure(config) -> None:
    # here, not in tests/conformance/conftest.py: under pytest-xdist only this conftest is loaded
    # by the controller, which receives every worker's reports and prints the score
    from tests.conformance.score import Tally

    config.pluginmanager.register(Tally(), "conformance-tally")
