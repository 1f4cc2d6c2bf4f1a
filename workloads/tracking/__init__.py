"""Lifecycle tracking (list + watch of the portal's objects): tracker.py runs it; index.py is
its view of the cluster, states.py derives workload states, events.py records events,
orphans.py deletes what no live workload owns."""
