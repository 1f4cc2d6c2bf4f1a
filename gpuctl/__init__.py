"""gpuctl: the GPU portal's command-line client (Keystone auth, the portal's REST API)."""
