"""gpuagent: the NVML exporter of a GPU node, in dcgm-exporter's format (see README.md)."""
