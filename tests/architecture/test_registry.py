"""Extension points are hooks of core.registry (core/registry.py): declared in the calling app's
`hooks.py` with a Protocol and an explicit order, filled in the apps' AppConfig.ready(), every
entry called in that order. No app keeps a dict of callables of its own, a `register_*`
function or a Django signal for the apps above it."""

from __future__ import annotations

import ast

import pytest

from core.registry import Hook, registry
from tests.architecture.layers import ROOT, app_modules


def test_no_app_keeps_an_extension_point_of_its_own():
    """Neither a Django signal nor a `register_*` function: the registry is the one way."""
    found = []
    for path in app_modules():
        tree = ast.parse(path.read_text(), str(path))
        where = path.relative_to(ROOT)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and (
                    isinstance(node.func, ast.Name) and node.func.id == "Signal"
                    or isinstance(node.func, ast.Attribute) and node.func.attr == "Signal"):
                found.append(f"{where}:{node.lineno}: a signal")
            if isinstance(node, ast.FunctionDef) and node.name.startswith("register_") \
                    and node in tree.body:
                found.append(f"{where}:{node.lineno}: {node.name}")
    assert not found, found


def test_every_hook_is_declared_in_a_hooks_module_and_filled_as_its_order_says():
    """Each hook's entries are registered (by the apps' ready()), all of them, in its order."""
    declared = {name for path in app_modules() if path.name == "hooks.py"
                for name in _hook_names(path)}
    hooks = {name: hook for name, hook in registry.items() if not name.startswith("test.")}
    assert set(hooks) == declared
    unfilled = {name: hook.order for name, hook in hooks.items()
                if [entry for entry, _ in hook.entries()] != list(hook.order)}
    assert not unfilled, unfilled


def _hook_names(path) -> set[str]:
    """The names of the hooks a module declares: `Hook[...]("name", ...)`."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript) \
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "Hook":
            assert isinstance(node.args[0], ast.Constant)
            names.add(node.args[0].value)
    return names


def test_the_launch_checks_run_in_the_order_their_hooks_declare():
    """Not the order of INSTALLED_APPS (budgets before calendars, workloads before both)."""
    from workloads.hooks import ADMISSION_CHECKS, LAUNCH_ADVISORS

    assert [name for name, _ in LAUNCH_ADVISORS.entries()] == \
        ["fit", "budget", "maintenance", "reservation", "capacity-outlook"]
    assert [name for name, _ in ADMISSION_CHECKS.entries()] == ["allocation", "budget",
                                                                "maintenance"]


@pytest.fixture
def hook():
    made = Hook[str]("test.order", order=("first", "second", "third"))
    yield made
    del registry["test.order"]


def test_entries_come_in_the_declared_order_whatever_the_registration_order(hook):
    hook.register("third", "c")
    hook.register("first", "a")
    assert list(hook) == ["a", "c"]
    hook.register("second", "b")
    hook.register("first", "A")  # registering a name again replaces its entry
    assert hook.entries() == [("first", "A"), ("second", "b"), ("third", "c")]


def test_an_entry_without_a_place_in_the_order_is_refused(hook):
    with pytest.raises(ValueError, match="'fourth' has no place in the order of test.order"):
        hook.register("fourth", "d")
    with pytest.raises(ValueError, match="declared already"):
        Hook[str]("test.order", order=("first",))
    assert not len(hook)


def test_a_test_may_put_other_entries_in_for_a_while(hook):
    hook.register("first", "a")
    with hook.replaced({"y": "Y", "x": "X"}, order=("x", "y")):
        assert list(hook) == ["X", "Y"]
    assert hook.entries() == [("first", "a")] and hook.order == ("first", "second", "third")
