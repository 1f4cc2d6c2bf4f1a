from __future__ import annotations

import pytest

from stack.demo_stack import DemoStack


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """The demo's own configuration, started for the module's tests (stack/demo_stack.py)."""
    stack = DemoStack(tmp_path_factory.mktemp("demo"))
    try:
        stack.start()
        yield stack
    finally:
        stack.close()
