"""Inside the layers, module by module: the only import cycles are a model module and its
querysets (the models name their managers, the querysets name the models for the type checker);
an import inside a function hides nothing; a model's keys, like its imports, point down.

- Every import counts: top-level, inside a function, under TYPE_CHECKING. An import deferred to
  run time is still a dependency, and a cycle behind one is still a cycle.
- An import of the project's own code inside a function is either in an `AppConfig.ready`
  (Django's registry must be filled before models are imported) or says in a comment on its
  line which cycle it breaks, `# cycle: a.b → c.d → a.b`, and that cycle is real: each step is a
  top-level import. Anything else goes to the top of the module.
- Work is queued by name (core/tasks.py): no writer imports a `tasks` module, and every name
  sent is a task Celery registers.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.apps import apps

from tests.architecture.layers import LAYERS, ROOT, module_from, module_name

APP_PACKAGES = tuple(unit for unit in LAYERS if unit != "stack")


@dataclass(frozen=True)
class Import:
    source: str  # the importing module
    target: str  # the imported module (a module of the project, resolved)
    line: int
    deferred: bool  # inside a function
    in_ready: bool  # inside an AppConfig's ready()
    comment: str  # the comment on the import's first line


def project_modules() -> dict[str, Path]:
    found = {}
    for package in APP_PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" not in path.parts:
                found[module_name(path)[0]] = path
    return found


def _parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> Iterator[Import]:
    """Every import of a project module in the file (`from package import module` names the
    module; `from module import name` the module)."""
    source = path.read_text()
    lines = source.splitlines()
    tree = ast.parse(source, str(path))
    parents = _parents(tree)
    is_package = path.name == "__init__.py"
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = module_from(node, name, is_package)
            targets = [f"{module}.{alias.name}" if f"{module}.{alias.name}" in modules
                       else module for alias in node.names]
        else:
            continue
        functions = []
        up = parents.get(node)
        while up is not None:
            if isinstance(up, ast.FunctionDef | ast.AsyncFunctionDef):
                functions.append(up)
            up = parents.get(up)
        in_ready = any(function.name == "ready" for function in functions) \
            and path.name == "apps.py"
        text = lines[node.lineno - 1]
        comment = text.split("#", 1)[1].strip() if "#" in text else ""
        for target in dict.fromkeys(targets):
            if target in modules and target != name:
                yield Import(name, target, node.lineno, bool(functions), in_ready, comment)


def all_imports() -> list[Import]:
    modules = project_modules()
    return [found for name, path in modules.items() for found in imports_of(name, path, modules)]


def strongly_connected(graph: dict[str, set[str]]) -> list[set[str]]:
    """The graph's cycles, as the sets of modules that reach one another (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def allowed_cycle(component: set[str]) -> bool:
    """An app's models and its querysets: nothing else."""
    apps_of = {module.rsplit(".", 1)[0] for module in component}
    kinds = {module.rsplit(".", 1)[1] for module in component}
    return len(apps_of) == 1 and kinds == {"models", "querysets"}


def test_the_only_import_cycles_are_models_and_querysets():
    graph: dict[str, set[str]] = {}
    for found in all_imports():
        graph.setdefault(found.source, set()).add(found.target)
    assert "workloads.services" in graph["workloads.tasks"]  # the graph is the project's
    cycles = [sorted(component) for component in strongly_connected(graph)]
    assert ["tenants.models", "tenants.querysets"] in cycles
    assert [cycle for cycle in cycles if not allowed_cycle(set(cycle))] == []


CYCLE_COMMENT = re.compile(r"cycle: (\S+(?: → \S+)+)")


def deferred_import_problems(imports: list[Import]) -> list[str]:
    """Each import of the project's code inside a function that is neither in AppConfig.ready
    nor marked with a real cycle (`# cycle: a → b → a`, each step a top-level import, from
    the imported module back to the importing one)."""
    top_level = {(found.source, found.target) for found in imports if not found.deferred}
    problems = []
    for found in imports:
        if not found.deferred or found.in_ready:
            continue
        where = f"{found.source.replace('.', '/')}.py:{found.line} imports {found.target}"
        named = CYCLE_COMMENT.search(found.comment)
        if named is None:
            problems.append(f"{where} inside a function: move it to the top of the module, or "
                            "name the cycle it breaks (# cycle: a → b → a)")
            continue
        steps = named.group(1).split(" → ")
        real = (steps[0] == found.source and steps[1] == found.target
                and steps[-1] == found.source
                and all((a, b) in top_level for a, b in zip(steps[1:], steps[2:], strict=False)))
        if not real:
            problems.append(f"{where}: no such cycle through top-level imports: {named.group(1)}")
    return problems


def test_imports_inside_functions_break_a_named_cycle_or_wait_for_the_registry():
    imports = all_imports()
    assert any(found.in_ready for found in imports)  # the walk sees AppConfig.ready's imports
    assert deferred_import_problems(imports) == []


def test_the_deferred_import_rule_sees_what_it_looks_for():
    """Positive controls: an unmarked deferred import, a cycle that is not there, and one that
    is."""
    top = [Import("a.models", "a.querysets", 3, False, False, ""),
           Import("a.querysets", "a.rules", 4, False, False, "")]
    unmarked = Import("a.rules", "a.models", 9, True, False, "")
    assert "move it to the top" in deferred_import_problems([*top, unmarked])[0]
    wrong = Import("a.rules", "a.models", 9, True, False, "cycle: a.rules → a.models → a.rules")
    assert "no such cycle" in deferred_import_problems([*top, wrong])[0]
    named = Import("a.rules", "a.models", 9, True, False,
                   "cycle: a.rules → a.models → a.querysets → a.rules")
    assert deferred_import_problems([*top, named]) == []
    in_ready = Import("a.apps", "a.models", 9, True, True, "")
    assert deferred_import_problems([*top, in_ready]) == []


def unit_of(module: str) -> str:
    return module.split(".")[0]


# Keys that run up the layers, each with its reason; the list may only shrink.
KEYS_UP = {
    # every app below tenants writes audit records, so audit sits below tenants; its record
    # names the tenant it happened in (set null when the tenant row goes). Its way out: the
    # tenant's id and name as plain columns, as the record already keeps its target's name.
    "audit.AuditRecord.tenant",
}


def test_no_model_holds_a_key_to_a_layer_above():
    """A key is a dependency, named as a string or not: the model's app needs the other one's
    table, migrations and rows. It points down the layers, or within the app."""
    up: dict[str, str] = {}
    seen = 0
    for model in apps.get_models():
        source = unit_of(model.__module__)
        if source not in LAYERS:
            continue
        for field in model._meta.get_fields():
            if not field.is_relation or field.auto_created or field.related_model is None:
                continue
            target = unit_of(field.related_model.__module__)
            seen += 1
            if target in LAYERS and LAYERS.index(target) < LAYERS.index(source):
                up[f"{model._meta.label}.{field.name}"] = (
                    f"→ {field.related_model._meta.label} ({source} is below {target})")
    assert seen > 20  # the project's keys were read
    assert {key: why for key, why in up.items() if key not in KEYS_UP} == {}
    assert KEYS_UP <= set(up), "a key in KEYS_UP no longer runs up: take it out of the list"


ALIAS_OF_ANY = re.compile(r"^([A-Z]\w*)(?:: TypeAlias)? = Any\b", re.M)


def test_no_class_is_typed_any_to_dodge_an_import():
    """`Workload = Any` hides a dependency from the layer test and the type checker both: a
    module that needs a class of a layer above belongs above it (or the class below it)."""
    found = [f"{path.relative_to(ROOT)}: {match.group(0)}"
             for path in project_modules().values()
             for match in ALIAS_OF_ANY.finditer(path.read_text())]
    assert ALIAS_OF_ANY.search("Workload = Any\n")
    assert found == []


def sent_names() -> list[tuple[str, str]]:
    """(where, name) of every task sent by name (send_on_commit's first argument)."""
    sent = []
    for path in project_modules().values():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "send_on_commit":
                first = node.args[0] if node.args else None
                names = ([first] if not isinstance(first, ast.IfExp)
                         else [first.body, first.orelse])
                for name in names:
                    assert isinstance(name, ast.Constant), \
                        f"{path.relative_to(ROOT)}:{node.lineno}: send a task by its name"
                    sent.append((f"{path.relative_to(ROOT)}:{node.lineno}", name.value))
    return sent


def test_every_task_sent_by_name_is_registered():
    from core.tasks import registered_task

    sent = sent_names()
    assert ("workloads/services.py", "workloads.tasks.workload_create_task") in \
        {(where.split(":")[0], name) for where, name in sent}
    for where, name in sent:
        assert registered_task(name).name == name, where


def test_an_unknown_task_name_fails_in_the_writer():
    from core.tasks import UnknownTask, send_on_commit

    with pytest.raises(UnknownTask, match="workloads.tasks.no_such_task"):
        send_on_commit("workloads.tasks.no_such_task", 1)


WORKERS_IMPORTERS = ("tasks.py", "celery.py")


def test_writers_never_import_the_workers():
    """A service, view or selector queues work by name; only a tasks module (and the Celery
    app, a management command that runs a task here) imports a `tasks` module."""
    found = [f"{found.source}:{found.line} imports {found.target}" for found in all_imports()
             if found.target.endswith(".tasks") and found.target != "core.tasks"
             and Path(found.source.replace(".", "/")).name + ".py" not in WORKERS_IMPORTERS
             and ".management." not in found.source]
    assert found == []
