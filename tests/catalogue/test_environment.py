"""The one rule for a workload's environment (catalogue/environment.py): the GPU stack's
variables are refused for everyone, the loader's on a researcher's fixed-command template."""

import pytest

from catalogue.environment import env_problems, env_template_problems, gpu_stack_refusal


@pytest.mark.parametrize("name", [
    "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES", "NVIDIA_REQUIRE_CUDA",
    "NVIDIA_REQUIRE_DRIVER", "NVIDIA_DISABLE_REQUIRE", "NVIDIA_MIG_CONFIG_DEVICES",
    "NVIDIA_MIG_MONITOR_DEVICES", "NVIDIA_IMEX_CHANNELS", "NVIDIA_GDS", "NVIDIA_MOFED",
    "NVIDIA_NVSWITCH", "NVIDIA_GDRCOPY", "NVIDIA_SOMETHING_NEW", "nvidia_visible_devices",
    "CUDA_VERSION",
])
def test_the_gpu_stacks_variables_are_refused(name):
    reason = gpu_stack_refusal(name)
    assert reason is not None and reason.startswith(f"{name} is refused: ")
    assert "NVIDIA container runtime" in reason
    assert env_problems({name: "all"}) == [reason]


@pytest.mark.parametrize("name", ["CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "NCCL_DEBUG",
                                  "MY_NVIDIA_THING", "PATH", "LD_PRELOAD"])
def test_what_narrows_or_stays_inside_the_container_is_allowed(name):
    assert gpu_stack_refusal(name) is None
    assert env_problems({name: "0"}) == []


def test_the_loaders_variables_only_on_a_fixed_command_template():
    env = {"LD_PRELOAD": "/x.so", "LD_LIBRARY_PATH": "/opt/lib", "SEED": "1"}
    problems = env_template_problems(env, fixed_command=True)
    assert [p.split(" ")[0] for p in problems] == ["LD_PRELOAD", "LD_LIBRARY_PATH"]
    assert all("fixed program" in p for p in problems)
    assert env_template_problems(env, fixed_command=False) == []  # custom, or an admin's


def test_names_sizes_and_the_token_variable():
    assert env_problems({"1BAD": "x"}) == ["1BAD is not a valid variable name."]
    assert env_problems({"BIG": "x" * (32 * 1024 + 1)}) == [
        "The value of BIG is longer than 32768 characters."]
    assert env_problems({f"V{i}": "" for i in range(101)}) == ["At most 100 variables."]
    assert env_template_problems({"JUPYTER_TOKEN": "mine"}, token_env="JUPYTER_TOKEN") == [
        "JUPYTER_TOKEN is set by the portal (the access token)."]
