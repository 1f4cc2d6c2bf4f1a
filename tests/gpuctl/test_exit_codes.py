"""gpuctl's exit code of an API error follows the error's `category`, which the portal gives
every error: every admission refusal exits 4 whatever its code, one gpuctl has never heard of
included; the other categories keep their codes. Before a launch, `launch --check` prints the
portal's notes as it wrote them."""

from __future__ import annotations

import datetime as dt
import json

from django.utils import timezone

from calendars.services import window_create
from calendars.validation import window_clean
from gpuctl.client import ApiError, AuthError, Unreachable
from gpuctl.config import ConfigError
from gpuctl.errors import EXIT_ADMISSION, WaitFailed, exit_code
from tests.support.cluster import cluster_cache_caught_up
from tests.support.gpuctl import live, run
from workloads.hooks import ADMISSION_CHECKS
from workloads.models import Workload
from workloads.services import AdmissionRefused

LAUNCH = ["launch", "--template", "jupyter", "--gpu-type", "a100", "--gpus", "1"]


@live
def test_a_maintenance_window_refusal_exits_4(portal):
    cluster_cache_caught_up()
    start = timezone.now() + dt.timedelta(hours=2)
    window_create(acting_user=None, fields=window_clean({
        "gpu_type": "a100", "reason": "driver update", "start": start.isoformat(),
        "end": (start + dt.timedelta(hours=4)).isoformat()}))
    # asked first (`launch --check`): the portal's own note, as it wrote it; nothing launched
    code, out, err = run([*LAUNCH, "--check"], portal)
    assert code == 0, err
    assert out.startswith("error: It would still be running at the start of "), out
    assert "To run it, set a maximum runtime under" in out
    code, out, _ = run([*LAUNCH, "--check", "--json"], portal)
    assert json.loads(out)["notes"][0]["level"] == "error"  # then the calendar's, if any
    assert not Workload.objects.exists()
    code, _, err = run(LAUNCH, portal)  # no maximum runtime: it would run into the window
    assert "maintenance_window" in err, err
    assert code == EXIT_ADMISSION == 4


class _Curfew(AdmissionRefused):
    code = "gpu_curfew"


@live
def test_an_admission_refusal_of_a_code_gpuctl_never_heard_of_exits_4(portal):
    def curfew(**_: object) -> None:
        raise _Curfew("No launches after midnight.")

    with ADMISSION_CHECKS.replaced({"curfew": curfew}, order=("curfew",)):
        code, _, err = run(LAUNCH, portal)
    assert "No launches after midnight. (403 gpu_curfew)" in err, err
    assert code == 4


def test_exit_codes_by_category():
    exits = {category: exit_code(ApiError(400, "x", "d", category=category).category)
             for category in ("invalid", "auth", "forbidden", "not_found", "conflict",
                              "admission", "rate_limited", "unavailable", "internal")}
    assert exits == {"invalid": 1, "auth": 3, "forbidden": 1, "not_found": 6, "conflict": 1,
                     "admission": 4, "rate_limited": 1, "unavailable": 7, "internal": 1}
    # an answer without a category (a proxy's, an older portal's): its status decides
    assert ApiError(503, "error", "Bad gateway").category == "unavailable"
    assert ApiError(404, "error", "no route").category == "not_found"
    # gpuctl's own errors have categories too, and exit by them alike
    assert [exit_code(error.category) for error in (
        ConfigError("no credentials"), AuthError("refused"), WaitFailed("still queued"),
        Unreachable("no route to the portal"))] == [2, 3, 5, 7]
