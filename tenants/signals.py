"""What tenants tell the apps above them, which tenants may not import (they import tenants).

`tenant_deleting` is sent inside the transaction that marks a tenant for deletion; receivers
act in that transaction and answer how many things they stopped (workloads connects
`workloads_stop_for_tenant`, so a deleted tenant's workloads stop with it).
"""

from django.dispatch import Signal

# keyword arguments: tenant, user (the acting user, None for the portal), reason
tenant_deleting = Signal()
