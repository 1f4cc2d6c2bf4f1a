"""What a workload's environment may hold: the one rule, for a researcher's launch
(workloads/validation.py, so the REST API and the launch page) and an admin's template
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

Some variables widen nothing outside the container but change what a template's fixed program
runs, before or inside it, with code or settings from elsewhere (the project's home volume is
writable by every workload of the project, so "elsewhere" is at hand): the program hooks. A
researcher may not set them on a template with a fixed program (Jupyter, TensorBoard, DIGITS,
which runs as root); on the custom template, whose image and command are the researcher's
anyway, they may. An admin's template may set them. They are, by what reads them:

- the dynamic loader and the C library, for every program: every `LD_` name (`LD_PRELOAD`,
  `LD_AUDIT` load a library into it; `LD_LIBRARY_PATH` chooses its libraries; the loader reads
  more, present and future), `GCONV_PATH` (loads character-set modules) and `GLIBC_TUNABLES`;
- the program's lookup: `PATH` (which `tensorboard` or `python` runs, and the `#!/usr/bin/env`
  of `start-notebook.py`), and `HOME`, `XDG_CONFIG_HOME`, `XDG_DATA_HOME` (whose configuration
  and user site-packages, with their `.pth` files, the program reads);
- interpreters, each by its namespace (present and future variables): every `PYTHON` name
  (`PYTHONSTARTUP`, `PYTHONPATH`, `PYTHONHOME`, `PYTHONUSERBASE`, `PYTHONPYCACHEPREFIX` and
  `PYTHONWARNINGS` (which imports the module it names), `PYTHONBREAKPOINT`, `PYTHONINSPECT` …),
  Jupyter's and IPython's configuration (every `JUPYTER_` name, `IPYTHONDIR`: configuration
  files are Python, and set the server's port and login), every `PERL` name (`PERL5OPT`,
  `PERL5LIB`), every `RUBY` name (`RUBYOPT`, `RUBYLIB`), every `NODE_` name (`NODE_OPTIONS`,
  `NODE_PATH`), the JVM's `JAVA_TOOL_OPTIONS`, `_JAVA_OPTIONS`, `JDK_JAVA_OPTIONS`, `CLASSPATH`;
- shells, which images' entrypoint scripts are: `BASH_ENV` and `ENV` (a file sourced at start),
  `BASH_FUNC_` names (exported functions), `SHELLOPTS`, `BASHOPTS` and `PS4` (xtrace with a
  command substitution in `PS4` runs it), `PROMPT_COMMAND`.

Harmless members of a namespace (`PYTHONUNBUFFERED`) go with it: a namespace is refused whole so
that a variable its interpreter learns later is refused too.

docs/security.md says the same for operators, with the node setting that makes the GPU stack
ignore these variables in unprivileged containers whatever sets them (an image's `ENV` too).
"""

from __future__ import annotations

import re

# a container environment variable's name, as the API server's validation accepts it
ENV_NAME = re.compile(r"[-._a-zA-Z][-._a-zA-Z0-9]*")

MAX_ENV_ITEMS = 100
MAX_ENV_VALUE = 32 * 1024
# Kubernetes bounds an env name by no length of its own, the pod (etcd's 1.5 MiB object) and the
# kernel (execve: 2 MiB of argv and environment together) bound the whole: a name is at most
# this long, and the environment as the kernel counts it ("NAME=value" and a NUL each) at most
# MAX_ENV_TOTAL bytes; validation.MAX_LAUNCH_BYTES bounds it with the command and arguments
MAX_ENV_NAME = 128
MAX_ENV_TOTAL = 128 * 1024

# the NVIDIA container toolkit's namespace: every variable it reads starts with it
GPU_STACK_PREFIX = "NVIDIA_"
GPU_STACK_NAMES = frozenset({"CUDA_VERSION"})
# what runs code or reads settings before or inside a fixed program (the list above)
PROGRAM_HOOK_PREFIXES = ("LD_", "PYTHON", "JUPYTER_", "PERL", "RUBY", "NODE_", "BASH_FUNC_")
PROGRAM_HOOK_NAMES = frozenset({
    "GCONV_PATH", "GLIBC_TUNABLES", "PATH", "HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME",
    "IPYTHONDIR", "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS", "CLASSPATH",
    "BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS", "PS4", "PROMPT_COMMAND"})


def program_hook(name: str) -> bool:
    """Whether `name` changes what a fixed program runs (a researcher may not set it there)."""
    upper = name.upper()
    return upper in PROGRAM_HOOK_NAMES or upper.startswith(PROGRAM_HOOK_PREFIXES)


def env_size(env: dict[str, str]) -> int:
    """The bytes `env` takes in a process, as the kernel counts them: NAME=value and a NUL."""
    return sum(len(key.encode()) + len(value.encode()) + 2 for key, value in env.items())


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
    long_names = [key for key in env if len(key) > MAX_ENV_NAME]
    problems += [f"“{key[:40]}…” is longer than {MAX_ENV_NAME} characters, the most a "
                 "variable's name may have." for key in long_names]
    problems += [f"{key} is not a valid variable name." for key in env
                 if key not in long_names and not ENV_NAME.fullmatch(key)]
    problems += [f"The value of {key} is longer than {MAX_ENV_VALUE} characters."
                 for key, value in env.items() if len(value) > MAX_ENV_VALUE]
    size = env_size(env)
    if size > MAX_ENV_TOTAL:
        problems.append(f"The variables take {size // 1024} KiB together; at most "
                        f"{MAX_ENV_TOTAL // 1024} KiB.")
    problems += [refusal for key in env if (refusal := gpu_stack_refusal(key))]
    return problems


def env_template_problems(env: dict[str, str], *, token_env: str = "",
                          fixed_command: bool = False) -> list[str]:
    """Why a researcher may not set `env` on this template (its access token's variable, the
    program hooks on a fixed program), or []. `fixed_command`: a researcher's launch of a
    template that runs its own program; False for an admin's template."""
    problems: list[str] = []
    if token_env and token_env in env:
        problems.append(f"{token_env} is set by the portal (the access token).")
    if fixed_command:
        problems += [f"{key} is refused on a template with a fixed program: it changes what "
                     "the template runs. Use the custom template to run your own."
                     for key in env if program_hook(key)]
    return problems
