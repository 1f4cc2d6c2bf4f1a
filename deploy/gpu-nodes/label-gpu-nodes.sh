#!/bin/sh
# GPU nodes for the portal: a `gputype` label per GPU model and the NVIDIA taint.
#
#   deploy/gpu-nodes/label-gpu-nodes.sh PRODUCT=GPUTYPE...
#   deploy/gpu-nodes/label-gpu-nodes.sh NVIDIA-A100-SXM4-80GB=a100 Tesla-V100-SXM2-32GB=v100 Tesla-T4=t4
#
# Every node that GPU feature discovery (GPU Operator) labelled nvidia.com/gpu.product=PRODUCT
# gets gputype=GPUTYPE (what the portal's GPU types select on, e.g. {"gputype": "a100"}) and the
# taint nvidia.com/gpu=present:NoSchedule (only pods that ask for GPUs land there; the portal's
# GPU workloads and the gpuagent DaemonSet tolerate it). Safe to run again, e.g. after adding
# nodes. `kubectl get nodes -L nvidia.com/gpu.product` lists the products. GPU types can also
# select on nvidia.com/gpu.product directly; then only the taint is needed from here.
# Environment: KUBECTL (default kubectl), KUBECONFIG as kubectl reads it.
set -eu
KUBECTL=${KUBECTL:-kubectl}
if [ $# -eq 0 ]; then
    echo "usage: $0 PRODUCT=GPUTYPE... (e.g. NVIDIA-A100-SXM4-80GB=a100)" >&2
    exit 2
fi
for mapping in "$@"; do
    case $mapping in
        ?*=?*) ;;
        *) echo "$0: not PRODUCT=GPUTYPE: $mapping" >&2; exit 2 ;;
    esac
done
for mapping in "$@"; do
    product=${mapping%%=*}
    gputype=${mapping#*=}
    selector="nvidia.com/gpu.product=$product"
    if [ -z "$($KUBECTL get nodes -l "$selector" -o name)" ]; then
        echo "$0: no node has $selector" >&2
        continue
    fi
    $KUBECTL label nodes -l "$selector" --overwrite "gputype=$gputype"
    $KUBECTL taint nodes -l "$selector" --overwrite "nvidia.com/gpu=present:NoSchedule"
done
