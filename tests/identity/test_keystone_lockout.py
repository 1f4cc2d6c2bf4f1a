"""Keystone's own lockout, as the embedded Keystone configures it ([security_compliance]): a
script that goes to Keystone directly, past the portal's login throttle, is stopped there too."""

import uuid

import pytest
from keystoneauth1 import exceptions as ks_exceptions
from keystoneauth1 import session as ks_session
from keystoneauth1.identity import v3

from stack.keystone import SERVICE_PASSWORD, SERVICE_USER


def _password_token(url: str, username: str, password: str) -> str:
    auth = v3.Password(auth_url=url, username=username, password=password,
                       user_domain_id="default", unscoped=True)
    return ks_session.Session(auth=auth, timeout=10).get_token()


def _fail(url: str, username: str, times: int) -> None:
    for _ in range(times):
        with pytest.raises(ks_exceptions.Unauthorized):
            _password_token(url, username, "not-the-password")


def test_the_right_password_is_refused_after_too_many_wrong_ones(keystone):
    attempts = keystone.install.lockout_attempts
    assert attempts > 0
    name = f"lockout-{uuid.uuid4().hex[:8]}"
    keystone.admin().users.create(name=name, domain="default", password="the-right-one",
                                  enabled=True)
    _fail(keystone.url, name, attempts - 1)
    assert _password_token(keystone.url, name, "the-right-one")  # a success resets the count
    _fail(keystone.url, name, attempts)
    with pytest.raises(ks_exceptions.Unauthorized):
        _password_token(keystone.url, name, "the-right-one")


def test_the_portals_own_identity_is_never_locked_out(keystone):
    _fail(keystone.url, SERVICE_USER, keystone.install.lockout_attempts + 2)
    assert _password_token(keystone.url, SERVICE_USER, SERVICE_PASSWORD)
