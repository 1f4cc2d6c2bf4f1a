"""How stack/k8s/build.py builds the Go components: once, whichever process asks first (the
others wait for its result), a component's binaries in one `go build`, and in the background in
the order the tests need them (tests/fixtures/builds.py: what a test waits for)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from stack.k8s import build
from tests.fixtures.builds import needed
from tests.support.gobuild import component, module, noting_go
from tests.support.waiting import eventually

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GPU_PORTAL_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_a_components_binaries_build_in_one_go_build(tmp_path, cache, monkeypatch):
    folder = module(tmp_path / "m", {"cmd/first": "", "cmd/second": ""})
    runs = noting_go(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    made = component(folder, {"first": "example.local/m/cmd/first",
                              "second": "example.local/m/cmd/second"})

    bin_dir = build.build(made, quiet=True)

    assert len(runs.read_text().splitlines()) == 1
    for name in ("first", "second"):
        assert subprocess.run([bin_dir / name], capture_output=True, text=True,
                              check=True).stdout == f"cmd/{name}\n"


def test_a_binary_named_apart_from_its_package_builds_on_its_own(tmp_path, cache, monkeypatch):
    folder = module(tmp_path / "m", {".": "", "cmd/other": ""})
    runs = noting_go(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")

    bin_dir = build.build(component(folder, {"root": ".", "other": "example.local/m/cmd/other"}),
                          quiet=True)

    assert len(runs.read_text().splitlines()) == 2
    assert (bin_dir / "root").is_file() and (bin_dir / "other").is_file()


def test_two_processes_build_a_component_once_the_second_waits_for_it(tmp_path, cache):
    folder = module(tmp_path / "m", {".": ""})
    gate = tmp_path / "gate"
    runs = noting_go(tmp_path / "bin", gate=gate)
    script = ("from pathlib import Path; from stack.k8s import build; "
              "from tests.support.gobuild import component; "
              f"print(build.build(component(Path({str(folder)!r}), {{'m': '.'}})))")
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}",
           "GPU_PORTAL_CACHE": str(cache)}

    def start(name: str) -> subprocess.Popen[str]:
        with open(tmp_path / f"{name}.err", "w") as err:
            return subprocess.Popen([sys.executable, "-c", script], cwd=REPO, env=env, text=True,
                                    stdout=subprocess.PIPE, stderr=err)

    first = start("first")
    eventually(runs.exists, timeout=30, message="the first build ran no go")
    second = start("second")
    # the second either waits for the first's lock (and says so) or runs go itself
    eventually(lambda: len(runs.read_text().splitlines()) > 1
               or "waiting for another process" in (tmp_path / "second.err").read_text(),
               timeout=30, message="the second process neither waited nor built")
    gate.touch()
    outputs = [p.communicate(timeout=120)[0] for p in (first, second)]

    assert [p.returncode for p in (first, second)] == [0, 0]
    assert len(runs.read_text().splitlines()) == 1
    assert outputs[0] == outputs[1]
    assert "building example.local/m" in (tmp_path / "first.err").read_text()
    assert "building" not in (tmp_path / "second.err").read_text()


def test_the_background_build_builds_in_order_and_goes_past_a_failure(tmp_path, cache,
                                                                       monkeypatch, capsys):
    good = component(module(tmp_path / "good", {".": ""}), {"good": "."}, name="good")
    bad = component(module(tmp_path / "bad", {".": "package main\n\nfunc main() { x }\n"}),
                    {"bad": "."}, name="bad")
    late = component(module(tmp_path / "late", {".": ""}), {"late": "."}, name="late")
    monkeypatch.setattr(build, "COMPONENTS", {c.name: c for c in (good, bad, late)})
    monkeypatch.setattr(build, "NEED_ORDER", ("late", "bad", "good"))
    (cache / "k8s").mkdir(parents=True)

    assert build._builder() == 0

    printed = capsys.readouterr()
    assert "stack.k8s.build: building bad of example.local/m v1 failed" in printed.out
    assert good.built() and late.built() and not bad.built()
    assert printed.err.index("(late)") < printed.err.index("(bad)") < printed.err.index("(good)")


def test_the_background_build_covers_every_component_once():
    assert sorted(build.NEED_ORDER) == sorted(build.COMPONENTS)
    assert set(build.CONTROL_PLANE) | set(build.QUEUEING) <= set(build.COMPONENTS)


def _item(*fixtures: str, marks: tuple[tuple[str, ...], ...] = ()) -> SimpleNamespace:
    return SimpleNamespace(nodeid="tests/x/test_y.py::test_z", fixturenames=list(fixtures),
                           iter_markers=lambda name: [SimpleNamespace(args=a) for a in marks])


@pytest.mark.parametrize(("item", "components"), [
    (_item("db"), ()),
    (_item("real_cluster"), build.CONTROL_PLANE),
    (_item("dra_cluster"), build.CONTROL_PLANE),
    (_item("kueue_cluster", "real_cluster"), build.CONTROL_PLANE + build.QUEUEING),
    (_item("multi_cluster"), build.CONTROL_PLANE + build.QUEUEING),
    (_item("real_cluster", marks=(("traefik",),)), (*build.CONTROL_PLANE, "traefik")),
    (_item("db", marks=(("oauth2-proxy", "versitygw"),)), ("oauth2-proxy", "versitygw")),
])
def test_a_test_waits_for_its_clusters_components_and_those_it_marks(item, components):
    assert needed(item) == components  # type: ignore[arg-type]


def test_the_background_build_without_go_says_so_at_once(tmp_path, cache):
    env = {**os.environ, "PATH": str(tmp_path), "GPU_PORTAL_CACHE": str(cache)}
    result = subprocess.run([sys.executable, "-m", "stack.k8s.build", "--background"], cwd=REPO,
                            env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert "the Go toolchain (go ≥ 1.26) is needed" in result.stderr
    assert not (cache / "k8s" / "background.log").exists()
