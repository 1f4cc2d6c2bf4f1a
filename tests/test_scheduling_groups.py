"""Which group a test goes with under `make test` (tests/fixtures/scheduling.py): each real
control plane's tests run in one process, which alone starts it."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.fixtures.scheduling import (
    BROWSER_GROUP,
    BUILT,
    CLUSTERS_BUILT,
    DEMO_GROUP,
    FILLER_SECONDS,
    FOLDER,
    KUEUE_GROUP,
    MULTI_GROUP,
    REAL_GROUP,
    clusters_built,
    group_of,
    ordered,
    pytest_configure_node,
)


@pytest.mark.parametrize(("fixtures", "group"), [
    (("real_cluster",), REAL_GROUP),
    (("kueue_cluster", "real_cluster"), KUEUE_GROUP),
    (("multi_cluster", "tenant_queue"), MULTI_GROUP),
    (("db",), None),
])
def test_a_test_goes_with_the_control_plane_it_uses(fixtures, group):
    item = SimpleNamespace(nodeid="tests/x/test_y.py::test_z", fixturenames=list(fixtures))
    assert group_of(item) == group  # type: ignore[arg-type]


def item(nodeid: str, *fixtures: str, builds: tuple[str, ...] = ()) -> SimpleNamespace:
    return SimpleNamespace(nodeid=nodeid, fixturenames=list(fixtures), iter_markers=lambda name:
                           [SimpleNamespace(args=builds)] if builds and name == "builds" else [])


def test_the_units_that_start_a_control_plane_go_out_last():
    """On a fresh machine their Go components build meanwhile (stack/k8s/build.py), a test's
    components besides its cluster's (a `builds` mark) after the cluster's. A test of no control
    plane that waits for one of its components goes with them; one that waits for a component
    built before them stays with the other files."""
    items = [item("tests/r/test_gateway.py::t", "real_cluster", builds=("traefik",)),
             item("tests/q/test_kueue.py::t", "kueue_cluster"),
             item("tests/r/test_dra.py::t", "dra_cluster"),
             item("tests/g/test_provisioner_go.py::t", builds=("provisioner",)),
             item("tests/a/test_short.py::t", "db"),
             item("tests/s/test_sshd_go.py::t", builds=("portal-sshd",)),
             item("tests/r/test_real.py::t", "real_cluster"),
             *(item(f"tests/a/test_long.py::t{n}", "db") for n in range(3)),
             item("tests/m/test_multi.py::t", "multi_cluster"),
             item("tests/browser/test_b.py::t", "page")]
    groups: dict[str, str] = {}

    order = [i.nodeid for i in ordered(items, groups)]  # type: ignore[arg-type]

    assert order == ["tests/browser/test_b.py::t",
                     *(f"tests/a/test_long.py::t{n}" for n in range(3)),
                     "tests/a/test_short.py::t", "tests/s/test_sshd_go.py::t",
                     "tests/r/test_real.py::t", "tests/r/test_gateway.py::t",
                     "tests/q/test_kueue.py::t",
                     "tests/m/test_multi.py::t", "tests/r/test_dra.py::t",
                     "tests/g/test_provisioner_go.py::t"]
    assert groups == {"tests/browser/test_b.py::t": BROWSER_GROUP,
                      "tests/r/test_gateway.py::t": REAL_GROUP,
                      "tests/r/test_real.py::t": REAL_GROUP,
                      "tests/q/test_kueue.py::t": KUEUE_GROUP,
                      "tests/m/test_multi.py::t": MULTI_GROUP}


def test_the_demos_tests_are_one_unit_as_long_as_its_files_together(tmp_path, monkeypatch):
    """They share one demo stack (tests/demo/conftest.py, package-scoped): in one process it
    starts once. The unit goes out by its files' seconds together, before a file that took
    longer than either of them alone."""
    import json

    from tests.fixtures import scheduling

    durations = tmp_path / "durations.json"
    durations.write_text(json.dumps({"tests/demo/test_burst.py": 80, "tests/demo/test_files.py": 30,
                                     "tests/a/test_long.py": 100, "tests/a/test_short.py": 5}))
    monkeypatch.setattr(scheduling, "DURATIONS", durations)
    items = [item("tests/a/test_long.py::t"), item("tests/a/test_short.py::t"),
             item("tests/demo/test_burst.py::t", "demo"),
             item("tests/demo/test_files.py::t", "demo")]
    groups: dict[str, str] = {}

    order = [i.nodeid for i in ordered(items, groups)]  # type: ignore[arg-type]

    assert order == ["tests/demo/test_burst.py::t", "tests/demo/test_files.py::t",
                     "tests/a/test_long.py::t", "tests/a/test_short.py::t"]
    assert groups == {"tests/demo/test_burst.py::t": DEMO_GROUP,
                      "tests/demo/test_files.py::t": DEMO_GROUP}


def test_once_the_control_planes_are_built_the_short_files_go_after_them():
    """They fill in while the other process runs a control plane's group: the groups are the
    largest units, and last they left one process idle at the end."""
    short = [f"tests/a/test_short.py::t{n}" for n in range(FILLER_SECONDS - 1)]
    long = [f"tests/a/test_long.py::t{n}" for n in range(FILLER_SECONDS)]
    items = [item("tests/r/test_real.py::t", "real_cluster"),
             *(item(nodeid, "db") for nodeid in short),
             item("tests/r/test_dra.py::t", "dra_cluster"),
             *(item(nodeid, "db") for nodeid in long),
             item("tests/browser/test_b.py::t", "page")]

    def order(built: bool) -> list[str]:
        return [i.nodeid for i in ordered(items, {}, clusters_built=built)]  # type: ignore[arg-type]

    cluster_units = ["tests/r/test_real.py::t", "tests/r/test_dra.py::t"]
    assert order(False) == ["tests/browser/test_b.py::t", *long, *short, *cluster_units]
    assert order(True) == ["tests/browser/test_b.py::t", *long, *cluster_units, *short]


def test_the_controller_tells_every_test_process_whether_the_control_planes_are_built():
    """Each process orders its collection by it: looked at once, the orders are alike."""
    from stack.k8s import build

    config = SimpleNamespace(stash={CLUSTERS_BUILT: True})
    nodes = [SimpleNamespace(config=config, gateway=SimpleNamespace(id=f"gw{n}"), workerinput={})
             for n in range(2)]
    config.stash[FOLDER] = Path("/nonexistent")
    for node in nodes:
        pytest_configure_node(node)
    assert [node.workerinput[BUILT] for node in nodes] == [True, True]
    assert clusters_built() == all(build.COMPONENTS[name].built() for name in (
        *build.CONTROL_PLANE, *build.QUEUEING))
