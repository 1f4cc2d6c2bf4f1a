"""gpu-portal-provisioner's own Go tests (stack/k8s/provisioner/volumes_test.go: a claim's folder
and volume, every name and link that would lead out of the root, deleting only inside it) run
here, so that `make test` reports them where it reports everything else. `make lint` runs
`go vet` on the same module."""

from __future__ import annotations

import pytest

from tests.support.golang import go_test


@pytest.mark.builds("provisioner")
def test_the_go_tests_pass():
    result = go_test("provisioner")
    assert result.returncode == 0, result.stdout + result.stderr
