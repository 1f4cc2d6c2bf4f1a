"""The workloads' OAuth client secrets are stored hashed with the derived-key hasher
(access/hashers.py): one PBKDF2 round, not the password default's million, since they are
256-bit keys; what was stored by the default hasher before still verifies."""

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import PBKDF2PasswordHasher, check_password, make_password
from oauth2_provider.models import Application

from access.hashers import DerivedSecretHasher
from access.services import client_secret_for
from tests.fixtures.factories import make_workload
from tests.workloads.api_calls import vision_lab_ready
from workloads.access import workload_access_create

pytestmark = pytest.mark.django_db


def test_a_launch_stores_its_client_secret_with_the_derived_key_hasher(login, gpu_types,
                                                                       cluster):
    vision = vision_lab_ready(login)
    workload = make_workload(vision, "researcher")
    access = workload_access_create(workload=workload,
                                    actor=get_user_model().objects.get(name="researcher"))
    stored = Application.objects.get(pk=access.application_id).client_secret
    secret = client_secret_for(access.application.client_id)
    assert stored.startswith(f"{DerivedSecretHasher.algorithm}$1$")
    assert secret not in stored
    assert check_password(secret, stored)
    assert not check_password(secret[:-1] + ("A" if secret[-1] != "A" else "B"), stored)


def test_a_secret_stored_by_the_default_hasher_still_verifies(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher",
                                 "access.hashers.DerivedSecretHasher"]  # as portal/settings.py
    secret = client_secret_for("workload-7-0123456789abcdef")
    old = PBKDF2PasswordHasher().encode(secret, "somesalt", iterations=1000)
    assert old.startswith("pbkdf2_sha256$1000$")
    assert check_password(secret, old)
    assert make_password(secret, hasher=DerivedSecretHasher.algorithm) != old
