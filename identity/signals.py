"""What the identity layer tells the apps above it, which it may not import (they import it).

`projects_seen` is sent with the Keystone projects a user was just seen with: at login
(identity_start, every project of theirs) and for an API caller's token (its project). tenants
connects `tenants_ensure_for_projects`: every Keystone project gets its tenant on first sight.
"""

from django.dispatch import Signal

# keyword arguments: projects (a list of identity.client.Project)
projects_seen = Signal()
