"""The top-level folders are the layers: each imports only folders below it, none above.

The units are the top-level packages: the project package `portal` (settings, urls, the Celery
app: it wires the apps and nothing imports it), the apps beside it (workloads, tenants, identity,
kube, …), the shared plumbing `core` under them all, `stack` above them all (it runs them), and the
standalone programs (kubesim, gpuagent, gpuctl). Every import statement counts, those inside functions too: an import
deferred to run time is still a dependency, and hiding a cycle behind one is what this test is
here to stop. ARCHITECTURE.md draws the same order.
"""

from __future__ import annotations

from collections import defaultdict

from tests.architecture.layers import LAYERS, ROOT, imported_modules, module_name

# programs of their own: they import nothing of the project; only stack runs them
STANDALONE = ("kubesim", "gpuagent", "gpuctl")
PACKAGES = LAYERS + STANDALONE


def unit(module: str) -> str | None:
    """The unit a module belongs to, None for what is not the project's (django, stdlib …)."""
    top = module.split(".")[0]
    return top if top in PACKAGES else None


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


def upward_imports(graph: dict[str, dict[str, list[str]]]) -> list[str]:
    """Every import that runs against LAYERS, or into or out of a standalone program."""
    found = []
    for source, targets in graph.items():
        for target, where in targets.items():
            if source in STANDALONE or (target in STANDALONE and source != "stack"):
                found.append(f"{source} → {target}: {', '.join(where[:3])}")
            elif target in LAYERS and LAYERS.index(target) < LAYERS.index(source):
                found.append(f"{source} → {target}: {', '.join(where[:3])}")
    return found


def test_every_top_level_folder_is_a_unit_of_the_layers():
    """A new app must take its place in LAYERS (and in ARCHITECTURE.md)."""
    folders = {path.parent.name for path in ROOT.glob("*/__init__.py")}
    assert folders - {"tests", "bench"} == set(PACKAGES)


def test_no_two_top_level_folders_import_each_other():
    graph = import_graph()
    # the graph is the project's: a walker that read nothing would find no cycle either
    assert "tenants" in graph["workloads"] and "catalogue" in graph["tenants"]
    cycle = find_cycle(graph)
    where = [f"{a} → {b}: {', '.join(graph[a][b][:3])}"
             for a, b in zip(cycle or [], (cycle or [])[1:], strict=False)]
    assert cycle is None, "import cycle:\n  " + "\n  ".join(where)


def test_every_import_runs_down_the_layers():
    graph = import_graph()
    assert "kube" in graph["cluster"] and "core" in graph["workloads"]
    assert not upward_imports(graph), "\n".join(upward_imports(graph))


def test_no_app_imports_the_project_package():
    graph = import_graph()
    assert [source for source, targets in graph.items() if "portal" in targets] == []


def test_the_checks_see_a_cycle_an_upward_import_and_deferred_imports():
    """The checkers themselves: a cycle made of a top-level and a deferred import is found, and
    so is an import that runs up the layers."""
    graph = {"a": {"b": ["a.py:1"]}, "b": {"c": ["b.py:1"]}, "c": {"a": ["c.py:9"]}}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b": ["x"]}, "b": {}}) is None
    assert upward_imports({"kube": {"workloads": ["kube/x.py:3"]}}) == [
        "kube → workloads: kube/x.py:3"]
    assert upward_imports({"workloads": {"kube": ["workloads/x.py:3"]}}) == []
    assert upward_imports({"workloads": {"kubesim": ["workloads/x.py:1"]}}) != []
    assert upward_imports({"gpuctl": {"core": ["gpuctl/x.py:1"]}}) != []
    deferred = ROOT / "tenants" / "services.py"
    assert any(module.startswith("django") for module, _ in imported_modules(deferred))


PAGE_MODULES = ("views.py", "forms.py", "admin_views.py", "admin_urls.py", "urls.py")


def test_pages_and_their_forms_import_no_rest_framework():
    """Validation is the domain's: a page's form wraps it as the API's serializer does, and no
    page reads its input through a DRF serializer."""
    pages = [path for package in PACKAGES for path in (ROOT / package).rglob("*.py")
             if path.name in PAGE_MODULES and "api" not in path.relative_to(ROOT).parts]
    assert ROOT / "workloads" / "forms.py" in pages  # the launch page's form
    found = [f"{path.relative_to(ROOT)}:{line} {module}" for path in pages
             for module, line in imported_modules(path)
             if module.startswith("rest_framework") or ".api." in f".{module}."
             or module.startswith("api.")]
    assert not found, found
