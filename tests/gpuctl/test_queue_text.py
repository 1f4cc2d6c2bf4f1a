"""How gpuctl says what a workload holds and where a queued one stands: the portal's own words
(the API's `gpus` and `queue_text`), never composed again from the other fields."""

from __future__ import annotations

import io

from gpuctl.commands.workload import WORKLOAD_COLUMNS, print_workload, state_text, wait_for
from gpuctl.output import print_table

QUEUED = {"id": 7, "name": "train", "state": "queued", "queue_position": 3, "queue_length": 7,
          "gpu_type": "a100", "gpu_count": 4, "nodes": 2, "eta": "2026-11-23T12:40:00Z",
          "eta_basis": "from maximum runtimes", "gpus": "2 nodes × 4× a100 (8 GPUs)",
          "queue_text": "queued — position 3 of 7 for a100, about 40 min"}


def test_the_record_shows_the_portals_texts():
    out = io.StringIO()
    print_workload(QUEUED, out)
    shown = out.getvalue()
    assert "gpus                 2 nodes × 4× a100 (8 GPUs)\n" in shown
    assert "queue_text           queued — position 3 of 7 for a100, about 40 min\n" in shown


def test_the_table_shows_the_portals_gpu_text_and_a_short_place():
    out = io.StringIO()
    print_table([QUEUED], WORKLOAD_COLUMNS, out)
    assert "2 nodes × 4× a100 (8 GPUs)" in out.getvalue()
    header = out.getvalue().splitlines()[0].split()
    assert header[header.index("GPUS") + 1] == "CLUSTER"  # where it runs (several clusters)
    assert state_text(QUEUED) == "queued 3/7"
    assert state_text({**QUEUED, "queue_position": None}) == "queued"


def test_waiting_says_why_kueue_holds_it_beside_the_place():
    answers = iter([{**QUEUED, "reason": "", "queue_reason": "Waiting for 2 more a100 "
                     "nvidia.com/gpu: the project's quota and what it may borrow are in use."},
                    {**QUEUED, "state": "running", "reason": "", "queue_text": None,
                     "queue_reason": None}])

    class Api:
        def get(self, path: str) -> dict:
            return next(answers)

    err = io.StringIO()
    wait_for(Api(), 7, until={"running"}, timeout=5, interval=0, err=err)
    assert err.getvalue().splitlines() == [
        "workload 7: queued — position 3 of 7 for a100, about 40 min (Waiting for 2 more a100 "
        "nvidia.com/gpu: the project's quota and what it may borrow are in use.)",
        "workload 7: running"]
