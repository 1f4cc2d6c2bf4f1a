"""gpu-portal-files' own Go tests (filesd/*_test.go: every operation, every way out of a volume,
the bearer token, a stop under way, against the server in the test process on loopback) run
here, so that `make test` reports them where it reports everything else. `make lint` runs
`go vet` on the same module."""

from __future__ import annotations

import pytest

from tests.support.golang import go_test


@pytest.mark.builds("portal-files")
def test_the_go_tests_pass():
    result = go_test("portal-files")
    assert result.returncode == 0, result.stdout + result.stderr
