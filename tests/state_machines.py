"""What the tests of each state machine (workloads/transitions.py, tenants/transitions.py) check
in the code, by reading its syntax trees.

- `state_writes`: every write of a `state` column, so that the machine is its model's one
  writer. A write is named with the line it is on and the name its chain starts from
  (`Tenant.objects.filter(…).update(state=…)` → "Tenant", `tenant.state = …` → "tenant"), so
  that each check can tell its model's writes from another's.
- `app_imports` and `modules_above`: the machine is the lowest writer of its app; it imports
  no module of the app that imports it (services, tasks, the tracker …), deferred imports too.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import NamedTuple

REPO = Path(__file__).resolve().parents[1]
# the folders of the project's code (tests, bench and the standalone programs aside)
SOURCES = ("portal", "usage", "workloads", "access", "tenants", "catalogue", "audit", "api",
           "identity", "cluster", "kube", "core")
CREATES = ("create", "get_or_create", "update_or_create")


class Write(NamedTuple):
    line: int
    root: str  # the name the written chain starts from


def _root(node: ast.AST) -> str:
    """The name a chain such as `Workload.objects.filter(...).update` starts from."""
    while True:
        if isinstance(node, ast.Attribute):
            node = node.value
        elif isinstance(node, ast.Call):
            node = node.func
        elif isinstance(node, ast.Subscript):
            node = node.value
        else:
            return node.id if isinstance(node, ast.Name) else ""


def _names_state(node: ast.AST | None) -> bool:
    return any(isinstance(n, ast.Constant) and n.value == "state" for n in ast.walk(node)) \
        if node is not None else False


def _state_dicts(tree: ast.AST) -> set[str]:
    """Names bound to a dict that holds a "state" key (`updates = {"state": …}`,
    `updates["state"] = …`)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if (isinstance(target, ast.Name) and isinstance(node.value, ast.Dict)
                        and any(_names_state(key) for key in node.value.keys)):
                    names.add(target.id)
                if (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name)
                        and _names_state(target.slice)):
                    names.add(target.value.id)
    return names


def _holds_state(value: ast.AST, state_dicts: set[str]) -> bool:
    """`{"state": …}`, or a name bound to a dict holding one."""
    if isinstance(value, ast.Dict):
        return any(_names_state(key) for key in value.keys)
    return isinstance(value, ast.Name) and value.id in state_dicts


def _call_writes_state(node: ast.Call, name: str, state_dicts: set[str]) -> bool:
    keywords = node.keywords
    if name == "update" or name in CREATES:
        if any(k.arg == "state" or (k.arg is None and _holds_state(k.value, state_dicts))
               for k in keywords):
            return True
        # get_or_create / update_or_create(…, defaults={"state": …})
        return name in CREATES and any(
            k.arg in ("defaults", "create_defaults") and _holds_state(k.value, state_dicts)
            for k in keywords)
    if name == "save":
        return any(k.arg == "update_fields" and _names_state(k.value) for k in keywords)
    if name == "bulk_update":
        return any(_names_state(a) for a in node.args[1:]) or any(
            k.arg == "fields" and _names_state(k.value) for k in keywords)
    return name == "setattr" and len(node.args) > 1 and _names_state(node.args[1])


def state_writes(source: str) -> list[Write]:
    """Every write of a `state`: `.update(state=…)` (or `**` a dict holding one), `x.state = …`,
    `create(state=…)` and `get_or_create`/`update_or_create` with it (or in their defaults),
    `save(update_fields=[…"state"…])`, `bulk_update(…, ["state"])`, `setattr(x, "state", …)`."""
    writes = set()
    tree = ast.parse(source)
    state_dicts = _state_dicts(tree)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for t in ast.walk(target):
                    if isinstance(t, ast.Attribute) and t.attr == "state":
                        writes.add(Write(node.lineno, _root(t.value)))
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else \
                func.id if isinstance(func, ast.Name) else ""
            if _call_writes_state(node, name, state_dicts):
                root = _root(node.args[0]) if name == "setattr" else _root(func)
                writes.add(Write(node.lineno, root))
    return sorted(writes)


def project_modules() -> list[Path]:
    """Every module of the project's code, as paths relative to the repository."""
    return [path.relative_to(REPO) for folder in SOURCES
            for path in sorted((REPO / folder).rglob("*.py"))]


def _is_module(name: str) -> bool:
    path = REPO.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def app_imports(module: Path) -> set[str]:
    """The modules of its own app (top-level folder) that a module imports, deferred imports
    and `from . import x` included, as dotted names (`workloads.services`)."""
    parts = module.with_suffix("").parts
    app = parts[0]
    package = list(parts[:-1])  # an __init__.py's package is its folder, as a module's is
    found = set()
    for node in ast.walk(ast.parse((REPO / module).read_text())):
        if isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(package[:len(package) - (node.level - 1)]
                                + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            candidates = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        found |= {name for name in candidates
                  if name.split(".")[0] == app and name != app and _is_module(name)}
    return found


def modules_above(module: Path) -> set[str]:
    """The modules of its app that import `module`, directly or through others: the layers
    above it, which it must not import."""
    app = module.parts[0]
    target = ".".join(module.with_suffix("").parts)
    graph = {".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__"):
             app_imports(path.relative_to(REPO))
             for path in sorted((REPO / app).rglob("*.py"))}
    above: set[str] = set()
    frontier = {target}
    while frontier:
        frontier = {name for name, imports in graph.items()
                    if imports & frontier and name not in above} - {target}
        above |= frontier
    return above
