"""`gpuctl quota` beside the quota as set: what is in force now and why, in the portal's words
(the API's `in_force.text` and each adjustment's `text`: gpuctl composes none of its own),
nothing more when nothing adjusts it."""

from gpuctl.commands.quota import quota_in_force_text, storage_limit_text

UNTIL = "until 2030-04-01 00:00 UTC"
ANSWER = {
    "gpus_total": 8, "gpus_by_type": {"a100": 4, "v100": 4}, "cpu": 32, "memory": 128,
    "in_force": {"gpus_total": 12, "gpus_by_type": {"a100": 2, "v100": 4}, "cpu": 48,
                 "memory": 192, "held": True, "held_reason": "GPU-hour budget: used up",
                 "text": "4 a100 nominal, -6 withheld for maintenance, +4 reserved → 2 in "
                         "force; 8 GPUs in all nominal, +4 → 12 in force; queue held: GPU-hour "
                         "budget: used up",
                 "gpus_by_type_text": {"a100": "4 a100 nominal, -6 withheld for maintenance, "
                                                "+4 reserved → 2 in force"}},
    "adjustments": [
        {"source": "budget_hold", "kind": "hold", "gpu_type": None, "gpus": 0,
         "reason": "GPU-hour budget: used up", "ref": "budget:1", "starts_at": None,
         "ends_at": "2030-04-01T00:00:00+00:00",
         "text": f"queue held {UNTIL}: GPU-hour budget: used up"},
        {"source": "maintenance", "kind": "delta", "gpu_type": "a100", "gpus": -6,
         "reason": "8 a100 GPUs in maintenance", "ref": "windows:3", "starts_at": None,
         "ends_at": None, "text": "-6 a100 withheld for maintenance: 8 a100 GPUs in maintenance"},
        {"source": "reservation", "kind": "delta", "gpu_type": "a100", "gpus": 4,
         "reason": "reservation #7 (4 a100)", "ref": "occurrence:9", "starts_at": None,
         "ends_at": None, "text": "+4 a100 reserved: reservation #7 (4 a100)"}],
}


def test_the_quota_in_force_is_shown_in_the_portals_words():
    text = quota_in_force_text(ANSWER)
    assert f"in force now: {ANSWER['in_force']['text']}\n" in text
    assert "gpus a100   2\n" in text and "gpus_total  12\n" in text
    assert text.endswith("adjustments:\n"
                         f"  queue held {UNTIL}: GPU-hour budget: used up\n"
                         "  -6 a100 withheld for maintenance: 8 a100 GPUs in maintenance\n"
                         "  +4 a100 reserved: reservation #7 (4 a100)\n")


def test_nothing_is_added_when_nothing_adjusts_the_quota():
    assert quota_in_force_text({**ANSWER, "adjustments": []}) == ""


def test_a_storage_classs_quota_in_words():
    assert storage_limit_text({"storage_gib": 200, "volumes": 5}) == "200 GiB, 5 volumes"
    assert storage_limit_text({"storage_gib": None, "volumes": 3}) == "3 volumes"
    assert storage_limit_text({"storage_gib": 0, "volumes": None}) == "0 GiB"
