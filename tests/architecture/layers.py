"""The layers of the project, top to bottom (tests/architecture/test_import_layers.py checks
every import against them; test_app_shape.py walks the apps among them)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# top to bottom: a unit may import the ones after it, never one before it; stack (the embedded
# stack and the real control plane) runs all of them, and takes the proxy's configuration
LAYERS = ("stack", "portal", "billing", "allocations", "files", "usage", "calendars", "budgets", "workloads",
          "credentials", "access", "notifications", "storage", "tenants", "catalogue", "clusters",
          "audit", "api",
          "identity", "cluster", "kube", "core")


def module_name(path: Path) -> tuple[str, bool]:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    if is_package:
        parts = parts[:-1]
    return ".".join(parts), is_package


def module_from(node: ast.ImportFrom, name: str, is_package: bool) -> str:
    """The absolute module a `from … import` in module `name` reads from."""
    if not node.level:
        return node.module or ""
    base = name.split(".") if is_package else name.split(".")[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imported_modules(path: Path) -> list[tuple[str, int]]:
    """(absolute module, line) for every import in the file, relative ones resolved."""
    name, is_package = module_name(path)
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.extend((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            found.append((module_from(node, name, is_package), node.lineno))
    return found


APPS = [app for app in LAYERS if app not in ("stack", "api")]


def app_modules() -> list[Path]:
    """Every module of the apps (the layers less stack and api), migrations left out."""
    return [path for app in APPS for path in sorted((ROOT / app).rglob("*.py"))
            if "migrations" not in path.parts]
