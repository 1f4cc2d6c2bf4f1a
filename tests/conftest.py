pytest_plugins = ["tests.fixtures.stack", "tests.fixtures.kubesim", "tests.fixtures.portal"]
