"""gpu-portal-sshd's own Go tests (sshd/*_test.go: authentication, local forwarding, sftp,
sessions, against the server in the test process on loopback) run here, so that `make test`
stays one run with one verdict and reports them where it reports everything else; the Go
toolchain is already what the suite needs to build the server (stack/k8s/build.py). `make lint`
runs `go vet` on the same module."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.support.golang import GO_ENV, go, go_test


@pytest.mark.builds("portal-sshd")
def test_the_go_tests_pass():
    result = go_test("portal-sshd")
    assert result.returncode == 0, result.stdout + result.stderr


def test_go_vet_fails_on_a_vet_error(tmp_path: Path):
    (tmp_path / "go.mod").write_text("module example.local/vetted\n\ngo 1.26\n")
    source = 'package main\n\nimport "fmt"\n\nfunc main() {{\n\tfmt.Printf("%d\\n", {})\n}}\n'
    (tmp_path / "main.go").write_text(source.format("1"))
    assert subprocess.run([go(), "vet", "./..."], cwd=tmp_path, env=GO_ENV,
                          capture_output=True, timeout=120).returncode == 0
    (tmp_path / "main.go").write_text(source.format('"one"'))
    result = subprocess.run([go(), "vet", "./..."], cwd=tmp_path, env=GO_ENV,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert "Printf format %d has arg" in result.stderr
