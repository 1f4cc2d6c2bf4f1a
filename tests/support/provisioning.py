"""Provisioning's tests: a tenant of their own."""

from __future__ import annotations

import uuid

import pytest

from tenants.services import tenant_ensure


@pytest.fixture
def tenant(gpu_types, cluster):
    # a fresh Keystone-like project id per test: its own namespace in the shared kubesim
    return tenant_ensure(keystone_project_id=uuid.uuid4().hex, name=f"Vision Lab {uuid.uuid4().hex[:6]}")
