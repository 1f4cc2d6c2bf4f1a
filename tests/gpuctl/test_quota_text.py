"""`gpuctl quota` beside the quota as set: what is in force now and why (the API's `in_force`
and `adjustments`), nothing more when nothing adjusts it."""

from gpuctl.commands.quota import quota_in_force_text

ANSWER = {
    "gpus_total": 8, "gpus_by_type": {"a100": 4, "v100": 4}, "cpu": 32, "memory": 128,
    "in_force": {"gpus_total": 12, "gpus_by_type": {"a100": 2, "v100": 4}, "cpu": 48,
                 "memory": 192, "held": True, "held_reason": "GPU-hour budget: used up"},
    "adjustments": [
        {"source": "budget_hold", "kind": "hold", "gpu_type": None, "gpus": 0,
         "reason": "GPU-hour budget: used up", "ref": "budget:1", "starts_at": None,
         "ends_at": "2030-04-01T00:00:00+00:00"},
        {"source": "maintenance", "kind": "delta", "gpu_type": "a100", "gpus": -6,
         "reason": "8 a100 GPUs in maintenance", "ref": "windows:3", "starts_at": None,
         "ends_at": None},
        {"source": "reservation", "kind": "delta", "gpu_type": "a100", "gpus": 4,
         "reason": "reservation #7 (4 a100)", "ref": "occurrence:9", "starts_at": None,
         "ends_at": None}],
}


def test_the_quota_in_force_is_shown_with_what_adjusts_it():
    text = quota_in_force_text(ANSWER)
    assert "in force now" in text
    assert "gpus a100   2\n" in text and "gpus_total  12\n" in text
    assert "queue held: GPU-hour budget: used up" in text
    assert "  budget_hold: queue held until 2030-04-01T00:00:00+00:00 (GPU-hour budget" in text
    assert "  maintenance: -6 a100 (8 a100 GPUs in maintenance)" in text
    assert "  reservation: +4 a100 (reservation #7 (4 a100))" in text


def test_nothing_is_added_when_nothing_adjusts_the_quota():
    assert quota_in_force_text({**ANSWER, "adjustments": []}) == ""
