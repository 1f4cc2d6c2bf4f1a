"""Every app has the same shape (ARCHITECTURE.md): one file name per kind of module. Routes live
in `urls.py` (the researchers' pages), `admin_urls.py` (the admin's, under /admin/) or
`api/urls.py`; DRF serializers in `api/serializers.py`, DRF views in `api/views.py`; what is
served under /admin/ comes from an `admin_views.py`, and an `admin_views.py` serves only there.
(The api app is the REST plumbing itself: its own modules are exempt from the api/ rules.)"""

from __future__ import annotations

import ast
from pathlib import Path

from django.urls import URLPattern, URLResolver, get_resolver

from tests.architecture.layers import APPS, ROOT, app_modules, imported_modules, module_name

ROUTE_FILES = {"urls.py", "admin_urls.py"}
DRF_SERIALIZERS = {"serializers"}
DRF_VIEWS = {"views", "viewsets", "generics", "mixins", "decorators"}


def in_api(path: Path) -> bool:
    return path.parent.name == "api" and path.parent.parent.parent == ROOT


def sets_urlpatterns(tree: ast.Module) -> bool:
    return any(isinstance(node, ast.Assign | ast.AnnAssign)
               and any(isinstance(target, ast.Name) and target.id == "urlpatterns"
                       for target in (node.targets if isinstance(node, ast.Assign)
                                      else [node.target]))
               for node in tree.body)


def drf_parts(tree: ast.Module) -> set[str]:
    """Which of DRF's serializers / views a module imports ("serializers", "views")."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            names = {alias.name for alias in node.names}
            if node.module == "rest_framework":
                found |= {"serializers"} & names | ({"views"} if names & DRF_VIEWS else set())
            elif node.module == "rest_framework.serializers":
                found.add("serializers")
            elif node.module == "api.viewsets" or (node.module.startswith("rest_framework.")
                                                   and node.module.split(".")[1] in DRF_VIEWS):
                found.add("views")
    return found


def test_routes_serializers_and_api_views_have_one_file_name_each():
    misplaced = []
    for path in app_modules():
        tree = ast.parse(path.read_text(), str(path))
        where = str(path.relative_to(ROOT))
        if sets_urlpatterns(tree) and not (path.name in ROUTE_FILES and not in_api(path)
                                           or in_api(path) and path.name == "urls.py"):
            misplaced.append(f"{where}: routes belong in urls.py, admin_urls.py or api/urls.py")
        parts = drf_parts(tree)
        if "serializers" in parts and not (in_api(path) and path.name in ("serializers.py",
                                                                           "views.py")):
            misplaced.append(f"{where}: a DRF serializer belongs in api/serializers.py")
        if "views" in parts and not (in_api(path) and path.name == "views.py"):
            misplaced.append(f"{where}: a DRF view belongs in api/views.py")
    assert not misplaced, misplaced


def test_the_checks_see_what_they_look_for():
    """Positive controls: the scans find the routes and DRF imports they are written for."""
    assert sets_urlpatterns(ast.parse((ROOT / "catalogue" / "api" / "urls.py").read_text()))
    assert drf_parts(ast.parse((ROOT / "catalogue" / "api" / "serializers.py").read_text())) \
        == {"serializers"}
    assert "views" in drf_parts(ast.parse((ROOT / "workloads" / "api" / "views.py").read_text()))
    assert drf_parts(ast.parse("from rest_framework import mixins, viewsets")) == {"views"}
    assert not sets_urlpatterns(ast.parse((ROOT / "catalogue" / "admin_views.py").read_text()))


def served_pages() -> list[tuple[str, str]]:
    """(route, module of its view) for every page outside the API and the OIDC provider."""
    found: list[tuple[str, str]] = []

    def walk(patterns, prefix: str) -> None:
        for entry in patterns:
            route = prefix + str(entry.pattern)
            if route.startswith(("api/", "o/")):
                continue
            if isinstance(entry, URLResolver):
                walk(entry.url_patterns, route)
            elif isinstance(entry, URLPattern):
                found.append((route, entry.callback.__module__))

    walk(get_resolver().url_patterns, "")
    return found


def test_admin_pages_are_served_from_admin_views_and_only_under_admin():
    pages = served_pages()
    assert ("admin/gpu-types/", "catalogue.admin_views") in pages  # the walk sees the admin's
    assert ("admin/audit/", "audit.admin_views") in pages
    wrong = [f"/{route} ← {module}" for route, module in pages
             if route.startswith("admin/") != module.endswith(".admin_views")]
    assert not wrong, wrong


def test_no_app_imports_another_apps_views():
    """Views are leaves: what two apps' pages share lives in a selector (the dashboard's GPU
    rows come from workloads.selectors, not from the launch page's view module)."""
    views = ("views", "admin_views")
    found = []
    for path in app_modules():
        if path.name in ROUTE_FILES or in_api(path) and path.name == "urls.py":
            continue  # routes name the views they serve
        here = module_name(path)[0].split(".")[0]
        for module, line in imported_modules(path):
            parts = module.split(".")
            if parts[0] != here and parts[0] in APPS and parts[-1] in views:
                found.append(f"{path.relative_to(ROOT)}:{line}: {module}")
    assert not found, found
