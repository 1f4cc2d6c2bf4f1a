"""Tests import their helpers from tests/support/ (or a helper module beside them), never from
another test module: a helper kept in a test module drags that module's fixtures and imports
along, and changes there break tests elsewhere. The one import from a test module left is how
tests/realcluster re-runs a kubesim suite on the real control plane: it imports that suite's
tests (`test_*` names) and nothing else."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.architecture.layers import ROOT

TESTS = ROOT / "tests"
RERUNS = Path("tests/realcluster")  # re-runs kubesim suites' tests by importing them


def is_test_module(module: str) -> bool:
    return module.startswith("tests.") and module.rsplit(".", 1)[-1].startswith("test_")


def imports_from_test_modules(source: str, path: Path) -> list[str]:
    """What `source` (the text of `path`, relative to the repository) imports from test modules
    that it may not, as "path:line module.name": `import tests.x.test_y`, `from tests.x import
    test_y`, names from a test module, relative imports resolved; those inside functions too."""
    package = list(path.with_suffix("").parts[:-1])
    rerun = path.is_relative_to(RERUNS)
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [f"{path}:{node.lineno} {a.name}" for a in node.names
                      if is_test_module(a.name)]
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            for alias in node.names:
                name = f"{module}.{alias.name}"
                if is_test_module(module):  # names from a test module
                    if not (rerun and alias.name.startswith("test_")):
                        found.append(f"{path}:{node.lineno} {name}")
                elif is_test_module(name):  # a test module itself, from its package
                    found.append(f"{path}:{node.lineno} {name}")
    return found


def test_no_test_module_imports_from_another():
    wrong = [line for path in sorted(TESTS.rglob("*.py"))
             for line in imports_from_test_modules(path.read_text(), path.relative_to(ROOT))]
    assert wrong == [], "move these into tests/support/ (or a helper module beside them):\n" \
        + "\n".join(wrong)


def test_the_check_sees_what_it_forbids():
    helper = "from tests.workloads.test_tracking import state_of\n"
    inside = "def f():\n    from tests.gpuctl.test_cli import run\n"
    module = "import tests.workloads.test_pages\n"
    rerun = "from tests.workloads.test_tracking import test_orphans_are_deleted, owner\n"
    assert imports_from_test_modules(helper, Path("tests/calendars/test_x.py")) == [
        "tests/calendars/test_x.py:1 tests.workloads.test_tracking.state_of"]
    assert len(imports_from_test_modules(inside, Path("tests/x/test_y.py"))) == 1
    assert len(imports_from_test_modules(module, Path("tests/x/test_y.py"))) == 1
    # a re-run imports the tests, not their helpers; elsewhere not even the tests
    assert imports_from_test_modules(rerun, Path("tests/realcluster/test_x.py")) \
        == ["tests/realcluster/test_x.py:1 tests.workloads.test_tracking.owner"]
    assert len(imports_from_test_modules(rerun, Path("tests/budgets/test_x.py"))) == 2
    assert imports_from_test_modules("from tests.support.tracking import state_of\n",
                                     Path("tests/x/test_y.py")) == []
    # the module as a name, and relative imports
    assert imports_from_test_modules("from tests.workloads import test_pages\n",
                                     Path("tests/workloads/test_x.py")) == [
        "tests/workloads/test_x.py:1 tests.workloads.test_pages"]
    assert imports_from_test_modules("from .test_manifests import JUPYTER\n",
                                     Path("tests/workloads/test_x.py")) == [
        "tests/workloads/test_x.py:1 tests.workloads.test_manifests.JUPYTER"]
    assert imports_from_test_modules("from . import test_pages\n",
                                     Path("tests/workloads/test_x.py")) == [
        "tests/workloads/test_x.py:1 tests.workloads.test_pages"]
    assert imports_from_test_modules("from .conftest import OUTPUT\n",
                                     Path("tests/browser/test_x.py")) == []
