"""The simulated control loops: workload controllers, garbage collection, MetalLB, endpoints."""
