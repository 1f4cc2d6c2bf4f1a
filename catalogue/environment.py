"""What a workload's environment may hold: the one rule, for a researcher's launch
(portal/workloads/validation.py, so the REST API and the launch page) and an admin's template
(`TemplateForm`) alike.

The GPU stack reads the container's environment before the container starts. The NVIDIA
container runtime (its hook and `nvidia-container-cli`) takes from it which GPUs to mount
(`NVIDIA_VISIBLE_DEVICES`; where the node honours it for unprivileged containers, `all` gives
the pod every GPU of the node, past the portal's quota and the scheduler), which MIG and IMEX
devices (`NVIDIA_MIG_CONFIG_DEVICES`, `NVIDIA_MIG_MONITOR_DEVICES`, `NVIDIA_IMEX_CHANNELS`),
which further devices (`NVIDIA_GDS`, `NVIDIA_MOFED`, `NVIDIA_NVSWITCH`, `NVIDIA_GDRCOPY`),
which driver libraries (`NVIDIA_DRIVER_CAPABILITIES`) and which checks to make
(`NVIDIA_REQUIRE_*`, `NVIDIA_DISABLE_REQUIRE`). `CUDA_VERSION` without `NVIDIA_REQUIRE_CUDA`
marks a "legacy" CUDA image, which gets every GPU when no device list is given. A workload's
GPUs are what the device plugin allotted it, so none of these is passed: every name in the
`NVIDIA_` namespace (present and future variables of the toolkit) and `CUDA_VERSION` are
refused, for researchers and admins alike (a template's environment reaches every workload
launched from it). Driver features an image needs come from the image's own `ENV`.

`CUDA_VISIBLE_DEVICES` (and `CUDA_DEVICE_ORDER`) are not refused: the CUDA runtime inside the
container reads them, and they can only hide or reorder the GPUs the container already has.

The dynamic loader's variables (`LD_PRELOAD`, `LD_LIBRARY_PATH`, `LD_AUDIT`) widen nothing
outside the container, but they change what a template's fixed command runs: a researcher may
not set them on a template with a fixed command (Jupyter, TensorBoard, DIGITS); on the custom
template, whose image and command are the researcher's anyway, they may. An admin's template
may set them.

docs/security.md says the same for operators, with the node setting that makes the GPU stack
ignore these variables in unprivileged containers whatever sets them (an image's `ENV` too).
"""

from __future__ import annotations

import re

# a container environment variable's name, as the API server's validation accepts it
ENV_NAME = re.compile(r"[-._a-zA-Z][-._a-zA-Z0-9]*")

MAX_ENV_ITEMS = 100
MAX_ENV_VALUE = 32 * 1024

# the NVIDIA container toolkit's namespace: every variable it reads starts with it
GPU_STACK_PREFIX = "NVIDIA_"
GPU_STACK_NAMES = frozenset({"CUDA_VERSION"})
LOADER_NAMES = frozenset({"LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT"})


def gpu_stack_refusal(name: str) -> str | None:
    """Why the GPU stack's variable `name` may not be set by anyone, or None."""
    upper = name.upper()
    if upper.startswith(GPU_STACK_PREFIX):
        return (f"{name} is refused: the NVIDIA container runtime reads NVIDIA_* variables to "
                "choose a container's GPUs and driver features, and a workload gets exactly "
                "the GPUs it was allotted.")
    if upper in GPU_STACK_NAMES:
        return (f"{name} is refused: the NVIDIA container runtime reads it (without "
                "NVIDIA_REQUIRE_CUDA it treats the image as a legacy one that gets every GPU).")
    return None


def env_problems(env: dict[str, str]) -> list[str]:
    """Why `env` may not be a workload's or a template's environment, whatever the template
    (names, sizes, the GPU stack's variables), or []."""
    problems: list[str] = []
    if len(env) > MAX_ENV_ITEMS:
        problems.append(f"At most {MAX_ENV_ITEMS} variables.")
    problems += [f"{key} is not a valid variable name." for key in env
                 if not ENV_NAME.fullmatch(key)]
    problems += [f"The value of {key} is longer than {MAX_ENV_VALUE} characters."
                 for key, value in env.items() if len(value) > MAX_ENV_VALUE]
    problems += [refusal for key in env if (refusal := gpu_stack_refusal(key))]
    return problems


def env_template_problems(env: dict[str, str], *, token_env: str = "",
                          fixed_command: bool = False) -> list[str]:
    """Why a researcher may not set `env` on this template (its access token's variable, the
    loader's variables on a fixed command), or []. `fixed_command`: a researcher's launch of a
    template that runs its own command; False for an admin's template."""
    problems: list[str] = []
    if token_env and token_env in env:
        problems.append(f"{token_env} is set by the portal (the access token).")
    if fixed_command:
        problems += [f"{key} is refused on a template with a fixed command: it changes what "
                     "the template runs. Use the custom template to run your own."
                     for key in env if key.upper() in LOADER_NAMES]
    return problems
