"""access/rules.py's rule, as a table: who opens a workload and who SSHes into it, under each
project rule, for a workload that holds its owner's own data and one that does not."""

import pytest

from access.models import ServiceAccess
from access.rules import PRIVATE_REFUSAL, may_open, may_ssh
from identity.roles import PortalRole

MEMBER, MANAGER, READER = PortalRole.MEMBER, PortalRole.MANAGER, PortalRole.READER


@pytest.mark.parametrize(("who", "role", "is_owner", "private", "opens", "sshes"), [
    # the project's rule, as before, where the workload holds nothing of its owner's own
    (ServiceAccess.MEMBERS, MEMBER, False, False, True, True),
    (ServiceAccess.READERS, READER, False, False, True, False),
    (ServiceAccess.OWNER, MEMBER, False, False, False, False),
    # its owner's own volume or secret in it: the owner and the managers only, any rule
    (ServiceAccess.MEMBERS, MEMBER, False, True, False, False),
    (ServiceAccess.READERS, READER, False, True, False, False),
    (ServiceAccess.MEMBERS, MEMBER, True, True, True, True),
    (ServiceAccess.OWNER, MANAGER, False, True, True, True),
])
def test_who_opens_and_who_sshes(who, role, is_owner, private, opens, sshes):
    opened = may_open(who=who, role=role, is_owner=is_owner, is_admin=False, private=private)
    assert bool(opened) is opens
    assert bool(may_ssh(who=who, role=role, is_owner=is_owner, is_admin=False,
                        private=private)) is sshes
    if private and not opens:
        assert opened.reason == PRIVATE_REFUSAL


def test_a_portal_admin_opens_a_private_workload():
    assert may_open(who=ServiceAccess.OWNER, role=None, is_owner=False, is_admin=True,
                    private=True)
