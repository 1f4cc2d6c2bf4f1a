"""Who gets through a service workload's proxy: one pure rule, used at the portal's login
(the authorization endpoint), at each proxy refresh and when a script asks for a token; and who
may SSH into it, the same rule narrowed to the project's members."""

from __future__ import annotations

import dataclasses

from identity.roles import PortalRole

from .models import ServiceAccess


@dataclasses.dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str  # said to the user on the 403 page, and logged

    def __bool__(self) -> bool:
        return self.allowed


PRIVATE_REFUSAL = ("The workload holds its owner's own volumes or secrets: only its owner and "
                   "the project's managers open it, whatever the project's rule.")


def may_open(*, who: str, role: PortalRole | None, is_owner: bool, is_admin: bool,
             workload_active: bool = True, private: bool = False) -> Decision:
    """May a user with `role` in the workload's project open it, under the tenant's rule
    `who` (ServiceAccess)? `private`: the workload mounts one of its owner's own volumes or
    reads one of their own secrets, which are the owner's (and the managers') alone: whoever
    opens the workload reads them, so the project's rule does not widen it."""
    if not workload_active:
        return Decision(False, "The workload is not running any more.")
    if is_admin:
        return Decision(True, "portal admin")
    if role is None:
        return Decision(False, "You have no role in the workload's project.")
    if role >= PortalRole.MANAGER:
        return Decision(True, f"{role.label} of the project")
    if is_owner and role >= PortalRole.MEMBER:
        return Decision(True, "owner")
    if private:
        return Decision(False, PRIVATE_REFUSAL)
    if who == ServiceAccess.OWNER:
        return Decision(False, "The project lets only a workload's owner and its managers "
                               "open its workloads.")
    if who == ServiceAccess.MEMBERS:
        if role >= PortalRole.MEMBER:
            return Decision(True, "member of the project")
        return Decision(False, "The project lets only its members open its workloads; "
                               "you are a reader.")
    return Decision(True, f"{role.label} of the project")


SSH_READER_REFUSAL = ("SSH (a shell in the workload and port forwarding through it) is for the "
                      "project's members, whatever its rule for opening workloads; you are a "
                      "reader.")


def may_ssh(*, who: str, role: PortalRole | None, is_owner: bool, is_admin: bool,
            workload_active: bool = True, private: bool = False) -> Decision:
    """May the user SSH into the workload? Only if they may open it (`may_open`) and are a
    member of its project or more (or a portal admin): a shell and `-L` forwarding reach
    everything the workload can, which a reader never may, even where the tenant's rule lets
    readers open its workloads' pages."""
    decision = may_open(who=who, role=role, is_owner=is_owner, is_admin=is_admin,
                        workload_active=workload_active, private=private)
    if decision and not is_admin and (role is None or role < PortalRole.MEMBER):
        return Decision(False, SSH_READER_REFUSAL)
    return decision
