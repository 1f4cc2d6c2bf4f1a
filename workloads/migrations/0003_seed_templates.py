"""The four templates every portal starts with (admins may edit or disable them)."""

from django.db import migrations

TEMPLATES = [
    {
        "slug": "jupyter", "name": "Jupyter", "kind": "service",
        "description": "JupyterLab with PyTorch and CUDA. Your notebooks live in /home/portal "
                       "when the project's home volume is mounted.",
        "image": "quay.io/jupyter/pytorch-notebook:cuda12-python-3.12",
        "args": ["start-notebook.py", "--ServerApp.root_dir=/home/portal"],
        "port": 8888, "default_cpu": 4, "default_memory_gb": 16,
        "run_as_non_root": True, "run_as_user": 1000,
        "token_env": "JUPYTER_TOKEN", "url_format": "{base}/lab?token={token}",
    },
    {
        "slug": "digits", "name": "NVIDIA DIGITS", "kind": "service",
        "description": "NVIDIA's Deep Learning GPU Training System, on port 5000.",
        "image": "nvcr.io/nvidia/digits:21.02-tensorflow-py3",
        "port": 5000, "default_cpu": 4, "default_memory_gb": 16,
        "run_as_non_root": False, "url_format": "{base}/",
    },
    {
        "slug": "tensorboard", "name": "TensorBoard", "kind": "service",
        "description": "TensorBoard over the logs in /home/portal/logs.",
        "image": "tensorflow/tensorflow:2.16.1-gpu",
        "command": ["tensorboard"],
        "args": ["--logdir", "/home/portal/logs", "--bind_all", "--port", "6006"],
        "port": 6006, "default_cpu": 2, "default_memory_gb": 8,
        "run_as_non_root": True, "run_as_user": 1000, "url_format": "{base}/",
    },
    {
        "slug": "custom", "name": "Custom image", "kind": "batch", "custom": True,
        "description": "Your own image and command, as a batch job or a service with a port.",
        "default_cpu": 4, "default_memory_gb": 16, "run_as_non_root": False,
        "url_format": "{base}/",
    },
]


def seed(apps, schema_editor):
    Template = apps.get_model("workloads", "Template")
    for spec in TEMPLATES:
        Template.objects.update_or_create(slug=spec["slug"], defaults=spec)


def unseed(apps, schema_editor):
    apps.get_model("workloads", "Template").objects.filter(
        slug__in=[t["slug"] for t in TEMPLATES]).delete()


class Migration(migrations.Migration):
    dependencies = [("workloads", "0002_template_trackercursor_workload_workloadevent_and_more")]
    operations = [migrations.RunPython(seed, unseed)]
