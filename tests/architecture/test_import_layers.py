"""No import cycle between the project's packages: every app sits below the ones that use it.

The units are the top-level packages (tenants, catalogue, audit, api, kubesim, …) and, inside
the project package `portal`, each app (portal.workloads, portal.usage, portal.keystone, …) and
each module of its own (portal.urls, portal.settings, …). Every import statement counts, those
inside functions too: an import deferred to run time is still a dependency, and hiding a cycle
behind one is what this test is here to stop.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("portal", "tenants", "catalogue", "audit", "api", "kubesim", "gpuagent", "gpuctl",
            "stack")


def unit(module: str) -> str | None:
    """The unit a module belongs to, None for what is not the project's (django, stdlib …)."""
    parts = module.split(".")
    if parts[0] not in PACKAGES:
        return None
    if parts[0] == "portal" and len(parts) > 1:
        return f"portal.{parts[1]}"
    return parts[0]


def module_name(path: Path) -> tuple[str, bool]:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    if is_package:
        parts = parts[:-1]
    return ".".join(parts), is_package


def imported_modules(path: Path) -> list[tuple[str, int]]:
    """(absolute module, line) for every import in the file, relative ones resolved."""
    name, is_package = module_name(path)
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.extend((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[:len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.append((module, node.lineno))
            # `from portal import views` imports the module portal.views
            found.extend((f"{module}.{alias.name}", node.lineno) for alias in node.names)
    return found


def import_graph() -> dict[str, dict[str, list[str]]]:
    """unit → unit it imports → where (file:line)."""
    graph: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            source = unit(module_name(path)[0])
            for module, line in imported_modules(path):
                target = unit(module)
                if target is None or target == source:
                    continue
                # `from portal import views` names portal.views; a plain name of portal/__init__
                # (none are imported) would be the unit "portal"
                if target == "portal" and module != "portal":
                    continue
                graph[source][target].append(f"{path.relative_to(ROOT)}:{line}")
    return graph


def find_cycle(graph: dict[str, dict[str, list[str]]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, {})):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                cycle = visit(nxt)
                if cycle:
                    return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def test_the_packages_import_one_another_without_a_cycle():
    graph = import_graph()
    # the graph is the project's: a walker that read nothing would find no cycle either
    assert "tenants" in graph["portal.workloads"] and "catalogue" in graph["tenants"]
    cycle = find_cycle(graph)
    where = [f"{a} → {b}: {', '.join(graph[a][b][:3])}"
             for a, b in zip(cycle or [], (cycle or [])[1:], strict=False)]
    assert cycle is None, "import cycle:\n  " + "\n  ".join(where)


def test_the_check_sees_a_cycle_and_deferred_imports():
    """The checker itself: a cycle made of a top-level and a deferred import is found."""
    graph = {"a": {"b": ["a.py:1"]}, "b": {"c": ["b.py:1"]}, "c": {"a": ["c.py:9"]}}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b": ["x"]}, "b": {}}) is None
    deferred = ROOT / "tenants" / "services.py"
    assert any(module.startswith("django") for module, _ in imported_modules(deferred))


def test_the_layers_that_architecture_md_draws():
    """The lowest layers import none of the apps: the Kubernetes client and the pure names,
    the audit trail and the GPU catalogue."""
    graph = import_graph()
    apps = {"tenants", "portal.workloads", "portal.usage", "portal.access", "api"}
    for low in ("portal.kube", "portal.cluster", "audit", "catalogue"):
        assert not apps & set(graph.get(low, {})), (low, dict(graph.get(low, {})))
    for standalone in ("kubesim", "gpuagent"):
        assert not any(target.startswith("portal") for target in graph.get(standalone, {}))


PAGE_MODULES = ("views.py", "forms.py", "admin_views.py", "admin_urls.py", "dashboard.py")


def test_pages_and_their_forms_import_no_rest_framework():
    """Validation is the domain's: a page's form wraps it as the API's serializer does, and no
    page reads its input through a DRF serializer."""
    pages = [path for package in PACKAGES for path in (ROOT / package).rglob("*.py")
             if path.name in PAGE_MODULES and "api" not in path.relative_to(ROOT).parts]
    assert ROOT / "portal" / "workloads" / "forms.py" in pages  # the launch page's form
    found = [f"{path.relative_to(ROOT)}:{line} {module}" for path in pages
             for module, line in imported_modules(path)
             if module.startswith("rest_framework") or ".api." in f".{module}."]
    assert not found, found
