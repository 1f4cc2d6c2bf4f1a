from __future__ import annotations

import pytest

from stack.demo_stack import DemoStack


@pytest.fixture(scope="package")
def demo(tmp_path_factory, demo_schema):
    """The demo's own configuration, started once for the package's tests (stack/demo_stack.py;
    under `make test` they run in one process: tests/fixtures/scheduling.py), its database and
    static files copied from the run's one migrated copy (demo_schema)."""
    stack = DemoStack(tmp_path_factory.mktemp("demo"), schema=demo_schema)
    try:
        stack.start()
        yield stack
    finally:
        stack.close()
