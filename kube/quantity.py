"""Kubernetes resource quantities ("500m", "4Gi", "8") as Decimals: the client's own parser."""

from kubernetes.utils.quantity import parse_quantity

__all__ = ["parse_quantity"]
