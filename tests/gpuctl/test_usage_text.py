"""`gpuctl usage` shows the report's columns as the portal answers them, storage's GiB-days
beside the GPU-hours, and the totals (a null storage total, one workload's report, left out)."""

from gpuctl.commands.usage import usage_text

REPORT = {
    "since": "2025-03-03T00:00:00Z", "until": "2025-03-04T00:00:00Z", "group_by": "tenant",
    "columns": ["tenant_id", "tenant", "gpu_hours_allocated", "gpu_hours_used",
                "utilisation_percent", "util_avg", "util_max", "samples", "workloads",
                "storage_gib_days"],
    "totals": {"gpu_hours_allocated": 6.0, "gpu_hours_used": 2.0, "utilisation_percent": 33.3,
               "storage_gib_days": 26.5},
    "results": [{"tenant_id": 1, "tenant": "vision-lab", "gpu_hours_allocated": 6.0,
                 "gpu_hours_used": 2.0, "utilisation_percent": 33.3, "util_avg": 50.0,
                 "util_max": 50.0, "samples": 960, "workloads": 2, "storage_gib_days": 26.5}],
}


def test_storage_gib_days_are_shown_beside_gpu_hours():
    lines = usage_text(REPORT).splitlines()
    assert lines[0] == "usage 2025-03-03T00:00:00Z .. 2025-03-04T00:00:00Z by tenant"
    assert lines[1].split()[-1] == "STORAGE_GIB_DAYS" and lines[2].split()[-1] == "26.5"
    assert lines[3] == ("total: gpu_hours_allocated 6.0, gpu_hours_used 2.0, "
                        "utilisation_percent 33.3, storage_gib_days 26.5")


def test_one_workloads_report_has_no_storage_total():
    text = usage_text({**REPORT, "totals": {**REPORT["totals"], "storage_gib_days": None}})
    assert "storage_gib_days" not in text.splitlines()[-1]
