"""One helper for each thing the pages, events and notices say the same way, beside what it
describes: a workload's GPUs (Workload.gpus_text), its link (Workload.get_absolute_url), a notice
to its owner (workloads.journal.notify_owner), and the names of its cluster objects and the
labels read from them (kube/labels.py, which writes them). A copy elsewhere drifts: the GPU text
was written three ways, the link three ways, the MPI role label twice."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from kube.labels import (
    MAX_GROUP_OBJECT_NAME,
    jobset_pod_host,
    pod_name_rank,
    workload_id_of_name,
    workload_object_name,
)
from tests.architecture.layers import LAYERS, ROOT


def app_sources() -> dict[str, str]:
    """Path (from the repository's root) → text of every module of the apps and the project
    package, migrations aside."""
    return {str(path.relative_to(ROOT)): path.read_text()
            for unit in LAYERS if unit != "stack"
            for path in sorted((ROOT / unit).rglob("*.py")) if "migrations" not in path.parts}


def places(pattern: str) -> set[str]:
    found = re.compile(pattern)
    return {path for path, text in app_sources().items() if found.search(text)}


def test_a_workloads_gpus_are_written_in_one_place():
    assert places(r"gpu_count\}× ") == {"workloads/models.py"}


def test_a_workloads_page_is_linked_from_one_place():
    assert places(r"""["']workloads:detail["']""") == {"workloads/models.py"}
    assert places(r"""f["']/workloads/\{""") == set()


def owner_notices_outside_the_journal() -> list[str]:
    """Calls of notify(…, users=[x.owner], …) anywhere but notify_owner itself."""
    found = []
    for path, text in app_sources().items():
        for node in ast.walk(ast.parse(text, path)):
            if not (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "notify"):
                continue
            users = next((k.value for k in node.keywords if k.arg == "users"), None)
            if isinstance(users, ast.List) and any(
                    isinstance(e, ast.Attribute) and e.attr == "owner" for e in users.elts):
                found.append(f"{path}:{node.lineno}")
    return found


def test_every_notice_to_a_workloads_owner_goes_through_notify_owner():
    found = owner_notices_outside_the_journal()
    assert [where for where in found if where.startswith("workloads/journal.py")]  # it looks
    assert [where for where in found if not where.startswith("workloads/journal.py")] == []


def test_object_names_and_controller_labels_are_written_and_read_in_kube_labels():
    """The name's shape (`wl-<id>-…`) and the MPI operator's role label: kube/labels.py only."""
    assert places(r"\bPREFIX\b") == {"kube/labels.py"}
    assert places(r"training\.kubeflow\.org/job-role") == {"kube/labels.py"}


def test_names_read_back_as_they_are_written():
    name = workload_object_name(42, "a" * 100, max_length=MAX_GROUP_OBJECT_NAME)
    assert workload_id_of_name(name) == 42
    assert workload_id_of_name("wl-420") == 420 and workload_id_of_name("wl-4x") is None
    assert pod_name_rank(name, f"{jobset_pod_host(name, 3)}-x7k2p") == 3
    assert pod_name_rank(name, f"{name}-worker-7") == 7
    assert pod_name_rank(name, f"{name}-launcher-x7k2p") == "launcher"
    assert pod_name_rank(name, "wl-43-other-r-0-3-x7k2p") is None


def test_the_scans_read_the_apps():
    assert "workloads/models.py" in app_sources() and Path(ROOT / "kube" / "labels.py").exists()
