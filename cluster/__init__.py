"""The cluster read model: nodes, pods and the portal's workload objects, kept by reflectors
(cache.py), and the one capacity view per GPU type derived from them (capacity.py)."""
