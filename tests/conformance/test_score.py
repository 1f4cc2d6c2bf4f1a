"""The score in kubesim/README.md is the one the suite's markers give (not a check itself: it
takes no cluster)."""

from __future__ import annotations

import subprocess
import sys

from tests.conformance.score import REPO, check_id


def test_check_ids_drop_only_the_cluster_parameter():
    assert check_id("t.py::test_a[kubesim]") == ("t.py::test_a", "kubesim")
    assert check_id("t.py::test_a[kube]") == ("t.py::test_a", "kube")
    assert check_id("t.py::test_b[kube-not-equals]") == ("t.py::test_b[not-equals]", "kube")
    assert check_id("t.py::test_c") == ("t.py::test_c", None)


def test_kubesim_readme_states_the_computed_score():
    result = subprocess.run([sys.executable, "-m", "tests.conformance.score", "--check-readme"],
                            cwd=REPO, capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "checks agree" in result.stdout
