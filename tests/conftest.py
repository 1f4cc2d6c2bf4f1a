pytest_plugins = ["tests.fixtures.stack", "tests.fixtures.kubesim", "tests.fixtures.realcluster",
                  "tests.fixtures.portal"]
