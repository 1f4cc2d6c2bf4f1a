"""The all-in-one manifests applied to a cluster: the overlay, and the kinds no controller
writes to."""

from __future__ import annotations

OVERLAY = "tests/deploy/overlays/kubesim"  # all-in-one + a throwaway gpu-portal-secrets


# kinds no kubesim controller writes to: their resourceVersion moves only when apply changes them
STATIC_KINDS = "pdb,statefulsets,ingresses,networkpolicies,configmaps,secrets"
