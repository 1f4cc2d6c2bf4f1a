"""Why Kueue holds a workload (workloads/kueue_reason.py): pure, on the shapes Kueue v0.19
writes — its Workload's conditions and the events on it — with the texts of its scheduler,
preemptor and DRA mapping. RECORDED_* are Kueue's texts as the tracker recorded them on the
real control plane (tests/queueing/test_kueue_cluster.py)."""

from __future__ import annotations

from workloads.kueue_reason import explain, from_event, from_events, from_workload, redact

OWN = frozenset({"gp-vision-lab"})

# a launch beyond the project's quota of 2 a100 (no borrowing), while 2 run
RECORDED_PENDING = ("couldn't assign flavors to pod set main: flavor gpu-t4 doesn't match node "
                    "affinity, flavor gpu-v100 doesn't match node affinity, insufficient unused "
                    "quota for nvidia.com/gpu in flavor gpu-a100, 2 more needed")
# a borrower preempted by the lender's batch job (after redaction: uids and paths out)
RECORDED_PREEMPTED = ("Preempted to accommodate a workload due to reclamation within the cohort; "
                      "preemptor effective priority: 100 (base: 100, boost: 0); preemptee "
                      "effective priority: 100 (base: 100, boost: 0)")

# a Workload Kueue cannot admit: the scheduler's QuotaReserved False and its message
SHORT = {
    "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
    "metadata": {"name": "job-wl-12-train-5c2a1", "namespace": "gp-vision-lab"},
    "spec": {"queueName": "gpu-portal", "priority": 100},
    "status": {"conditions": [{
        "type": "QuotaReserved", "status": "False", "reason": "Pending",
        "lastTransitionTime": "2026-11-29T05:40:01Z", "observedGeneration": 1,
        "message": "couldn't assign flavors to pod set main: insufficient unused quota for "
                   "nvidia.com/gpu in flavor gpu-a100, 1 more needed"}]},
}

PREEMPTION = ("Preempted to accommodate a workload (UID: 6f1c2d9e-0000-4a4a-9e9e-1b2b3c4d5e6f, "
              "JobUID: 0d9e8f7a-1111-4b4b-8c8c-2c3d4e5f6a7b) due to reclamation within the "
              "cohort; preemptor path: /gpu-portal/gp-chemistry; preemptee path: "
              "/gpu-portal/gp-vision-lab")

# a borrower Kueue preempted for the lender: Evicted True (Preempted), QuotaReserved False
PREEMPTED = {
    "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
    "metadata": {"name": "job-wl-13-train-7d1e0", "namespace": "gp-vision-lab"},
    "status": {"conditions": [
        {"type": "QuotaReserved", "status": "False", "reason": "Pending",
         "message": "The workload has no reservation",
         "lastTransitionTime": "2026-11-29T05:41:00Z"},
        {"type": "Evicted", "status": "True", "reason": "Preempted", "message": PREEMPTION,
         "lastTransitionTime": "2026-11-29T05:41:00Z"},
        {"type": "Preempted", "status": "True", "reason": "InCohortReclamation",
         "message": PREEMPTION, "lastTransitionTime": "2026-11-29T05:41:00Z"},
        {"type": "Admitted", "status": "False", "reason": "NoReservation",
         "message": "The workload has no reservation",
         "lastTransitionTime": "2026-11-29T05:41:00Z"}]},
}


def test_a_launch_beyond_the_quota_says_how_many_more_gpus_it_waits_for():
    why = from_workload(SHORT, OWN)
    assert why is not None
    assert why.reason.startswith("Waiting for 1 more a100 nvidia.com/gpu")
    assert why.message == SHORT["status"]["conditions"][0]["message"]


def test_an_admitted_workload_or_one_kueue_has_not_looked_at_has_no_reason():
    admitted = {"status": {"conditions": [{"type": "QuotaReserved", "status": "True",
                                           "reason": "QuotaReserved", "message": "Quota reserved "
                                           "in ClusterQueue gp-vision-lab"}]}}
    assert from_workload(admitted, OWN) is None
    assert from_workload({"status": {}}, OWN) is None


def test_a_preempted_one_says_so_and_never_names_the_preemptor_or_its_queue():
    why = from_workload(PREEMPTED, OWN)
    assert why is not None
    assert why.reason.startswith("Preempted: the GPUs it borrowed were taken back")
    for secret in ("gp-chemistry", "6f1c2d9e", "0d9e8f7a", "preemptor path", "/gpu-portal/"):
        assert secret not in why.message and secret not in why.reason
    assert "reclamation within the cohort" in why.message


def test_the_preemption_event_says_by_what_priority():
    event = (PREEMPTION + "; preemptor effective priority: 1000 (base: 1000, boost: 0); "
             "preemptee effective priority: 100 (base: 100, boost: 0)")
    why = from_event("Preempted", event, OWN)
    assert why is not None
    assert "(priority 1000)" in why.reason
    assert "gp-chemistry" not in why.message and "UID" not in why.message
    assert "preemptor effective priority: 1000" in why.message


def test_within_the_project_a_higher_priority_workload_preempts():
    text = explain("Preempted", "Preempted to accommodate a workload due to prioritization in "
                                "the ClusterQueue; preemptor effective priority: 1000")
    assert text.startswith("Preempted by a workload of higher priority (priority 1000) in this "
                           "project's queue")


def test_requeued_after_its_pods_were_not_ready_in_time():
    why = from_workload({"status": {"conditions": [
        {"type": "Evicted", "status": "True", "reason": "PodsReadyTimeout",
         "message": "Exceeded the PodsReady timeout gp-vision-lab/job-wl-14-x-1a2b3"},
        {"type": "Requeued", "status": "False", "reason": "PodsReadyTimeout",
         "message": "Exceeded the PodsReady timeout gp-vision-lab/job-wl-14-x-1a2b3"}]}}, OWN)
    assert why is not None
    assert why.reason.startswith("Requeued: its pods were not ready in time")


def test_a_dra_device_class_kueue_does_not_map_is_an_administrators_fix():
    message = ("DeviceClass gpu.example.com is not mapped in DRA configuration for podset main")
    why = from_event("Pending", message, OWN)
    assert why is not None
    assert "device class gpu.example.com is not mapped" in why.reason
    assert "administrator" in why.reason


def test_a_department_cap_is_a_borrowing_limit_and_its_cohort_is_not_named():
    message = ("couldn't assign flavors to pod set main: borrowing limit for nvidia.com/gpu in "
               "flavor gpu-a100 exceeded in cohort gpu-portal-department-7")
    why = from_event("Pending", message, OWN)
    assert why is not None
    assert "borrowing cap" in why.reason
    assert "department-7" not in why.message


def test_other_projects_queues_are_never_named_but_its_own_is():
    text = redact("Preempted workload gp-chemistry/job-wl-9-a-1b2c3 (UID: 1234) in "
                  "ClusterQueue gp-chemistry; waiting in ClusterQueue gp-vision-lab", OWN)
    assert "gp-chemistry" not in text and "1234" not in text
    assert "ClusterQueue gp-vision-lab" in text


def test_an_admission_check_and_a_plain_message_read_as_kueue_wrote_them():
    assert explain("Pending", "waiting for admission check multikueue").startswith(
        "Waiting for an admission check")
    assert explain("Pending", "something new Kueue says") == "something new Kueue says"


def test_the_recorded_texts_read_in_the_portals_words():
    pending = from_event("Pending", RECORDED_PENDING, OWN)
    assert pending is not None
    assert pending.reason == ("Waiting for 2 more a100 nvidia.com/gpu: the project's quota and "
                              "what it may borrow are in use.")
    assert pending.message == RECORDED_PENDING
    preempted = from_event("Preempted", RECORDED_PREEMPTED, OWN)
    assert preempted is not None
    assert preempted.reason.startswith("Preempted: the GPUs it borrowed were taken back for a "
                                       "workload (priority 100)")
    assert redact(RECORDED_PREEMPTED, OWN) == RECORDED_PREEMPTED  # nothing more to take out


def test_events_that_say_it_got_quota_end_the_reason():
    assert from_event("QuotaReserved", "Quota reserved in ClusterQueue x", OWN) is None
    assert from_event("Admitted", "Admitted by ClusterQueue x", OWN) is None


def test_since_it_last_got_quota_a_preemption_comes_first_then_what_it_waits_for():
    pending = ("couldn't assign flavors to pod set main: insufficient unused quota for "
               "nvidia.com/gpu in flavor gpu-a100, 4 more needed")
    preempted = PREEMPTION + "; preemptor effective priority: 1000 (base: 1000, boost: 0)"
    events = [("Pending", pending), ("QuotaReserved", "Quota reserved in ClusterQueue x"),
              ("Admitted", "Admitted by ClusterQueue x"), ("Preempted", preempted),
              ("Pending", pending)]
    why = from_events(events, OWN)
    assert why is not None
    assert why.reason.startswith("Preempted: the GPUs it borrowed were taken back for a "
                                 "workload (priority 1000)")
    assert why.reason.endswith("Waiting for 4 more a100 nvidia.com/gpu: the project's quota "
                               "and what it may borrow are in use.")
    assert why.message == pending
    # admitted again: nothing holds it
    assert from_events([*events, ("QuotaReserved", "Quota reserved")], OWN) is None
    # before any quota: only what it waits for
    first = from_events(events[:1], OWN)
    assert first is not None and first.reason.startswith("Waiting for 4 more")


def test_an_eviction_for_pods_not_ready_in_time_is_a_requeue():
    why = from_events([("EvictedDueToPodsReadyTimeout",
                        "Exceeded the PodsReady timeout gp-vision-lab/job-wl-14-x-1a2b3")], OWN)
    assert why is not None and why.reason.startswith("Requeued: its pods were not ready")


def test_kueues_eviction_event_of_a_preemption_reads_as_one_and_yields_to_the_preemptors():
    evicted = ("Preempted to accommodate a workload (UID: 6f1c, JobUID: 0d9e) due to "
               "reclamation within the cohort; preemptor path: /gpu-portal/gp-chemistry; "
               "preemptee path: /gpu-portal/gp-vision-lab")
    alone = from_events([("EvictedDueToPreempted", evicted)], OWN)
    assert alone is not None and alone.reason.startswith("Preempted: the GPUs it borrowed")
    assert "gp-chemistry" not in alone.message
    both = from_events([("Preempted", RECORDED_PREEMPTED), ("EvictedDueToPreempted", evicted)],
                       OWN)
    assert both is not None and "(priority 100)" in both.reason
    assert both.reason.count("Preempted") == 1
