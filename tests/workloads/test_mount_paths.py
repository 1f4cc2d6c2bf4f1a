"""Where a launch may put a volume and a secret's files: one list of the container's own trees
(core/validation.py) for both, refused whether the path lies under one of them or would cover
one; what is neither passes unchanged."""

from __future__ import annotations

import pytest

from credentials.validation import path_problem
from workloads.mounts import MountRefused, mount_path_clean


@pytest.mark.parametrize("path", ["/", "/etc", "/etc/ssl", "/usr/local/data", "/var",
                                  "/var/run", "/var/run/secrets", "/var/lib/kubelet/pods",
                                  "/run", "/run/secrets", "/run/secrets/kubernetes.io/x",
                                  "/dev/shm", "/proc/self", "/libx32"])
def test_a_path_under_or_above_a_system_tree_is_refused_for_volumes_and_secrets(path):
    with pytest.raises(MountRefused, match="is a system path: it (overlaps|would hide)"):
        mount_path_clean(path)
    assert path_problem(path) is not None


@pytest.mark.parametrize("path", ["/data", "/mnt/scratch", "/workspace/runs", "/run/secrets/hf",
                                  "/var/data", "/opt/models"])
def test_other_paths_pass_both(path):
    assert mount_path_clean(path) == path
    assert path_problem(path) is None
