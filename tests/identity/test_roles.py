import pytest

from identity.roles import PortalRole, effective_role, is_portal_admin, project_role


@pytest.mark.parametrize(
    ("roles", "expected"),
    [
        (["reader"], PortalRole.READER),
        (["member", "reader"], PortalRole.MEMBER),
        (["manager", "member", "reader"], PortalRole.MANAGER),
        # admin on an ordinary project is that project's manager, not a portal admin
        (["admin", "manager", "member", "reader"], PortalRole.MANAGER),
        (["_member_"], PortalRole.MEMBER),
        (["service"], None),
        ([], None),
    ],
)
def test_project_role(roles, expected):
    assert project_role(roles) == expected


def test_portal_admin_needs_the_admin_project_or_system_scope():
    assert is_portal_admin(project_name="admin", role_names=["admin"], system_scoped=False)
    assert is_portal_admin(project_name=None, role_names=["admin"], system_scoped=True)
    assert not is_portal_admin(project_name="vision-lab", role_names=["admin"], system_scoped=False)
    assert not is_portal_admin(project_name="admin", role_names=["member"], system_scoped=False)


def test_portal_admin_is_admin_everywhere():
    assert effective_role(PortalRole.READER, portal_admin=True) is PortalRole.ADMIN
    assert effective_role(None, portal_admin=True) is PortalRole.ADMIN
    assert effective_role(PortalRole.MEMBER, portal_admin=False) is PortalRole.MEMBER


def test_capabilities_follow_the_order():
    assert not PortalRole.READER.can_launch
    assert PortalRole.MEMBER.can_launch and not PortalRole.MEMBER.can_manage_all
    assert PortalRole.MANAGER.can_manage_all
