from __future__ import annotations

from pathlib import Path

import pytest

from stack.demo_stack import DemoStack


@pytest.fixture(scope="session")
def demo_schema(tmp_path_factory, worker_id) -> Path:
    """Where the run's demos keep the one migrated database and static files they copy
    (stack/demo_stack.py shared_schema): beside the test processes' own folders, for all."""
    root = tmp_path_factory.getbasetemp()
    return (root if worker_id == "master" else root.parent) / "demo-schema"


@pytest.fixture(scope="module")
def demo(tmp_path_factory, demo_schema):
    """The demo's own configuration, started for the module's tests (stack/demo_stack.py)."""
    stack = DemoStack(tmp_path_factory.mktemp("demo"), schema=demo_schema)
    try:
        stack.start()
        yield stack
    finally:
        stack.close()
