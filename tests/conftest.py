pytest_plugins = ["tests.fixtures.stack"]
