"""The benchmark's figures on tiny hand-computed schedules (every time a multiple of 1/4 s)."""

from __future__ import annotations

from typing import Any

import pytest

from captcha_tasks_dev.bench.metrics import (
    Outcome,
    backlogged_utilisation,
    busy_seconds,
    cpu_figures,
    failure_reason,
    ideal_finish,
    page_metrics,
    percentile,
    refill_gaps,
    run_window,
    solve_metrics,
    utilisation,
    zero_overhead_fraction,
)
from captcha_tasks_dev.bench.report import Row, field, fields, joined, render_report, section


def captcha(
    cid: str, submitted: float, ready: float, answered: float | None = None, polls: int = 1
) -> dict[str, Any]:
    """A captcha as ``GET /admin/captchas`` lists it."""
    return {
        "id": cid,
        "submitted_at": submitted,
        "ready_at": ready,
        "answered_at": answered,
        "latency": ready - submitted,
        "polls": polls,
    }


#: Two threads from t=1000: a and b start at once, c takes a's thread the moment it
#: frees (1002), d takes b's a second after it freed (1003 -> 1004).
SCHEDULE = [
    captcha("a", 1000.0, 1002.0),
    captcha("b", 1000.0, 1003.0),
    captcha("c", 1002.0, 1004.0),
    captcha("d", 1004.0, 1005.0),
]


def test_percentiles_interpolate_between_neighbours() -> None:
    values = [4.0, 1.0, 3.0, 2.0]
    assert percentile(values, 0.0) == 1.0
    assert percentile(values, 0.5) == 2.5  # halfway between 2 and 3
    assert percentile(values, 1.0) == 4.0
    assert percentile(values, 0.95) == pytest.approx(3.85)  # 3 + 0.85 x (4 - 3)
    assert percentile([0.123456], 0.5) == 0.1235  # to 0.1 ms
    assert percentile([], 0.5) is None


def test_ideal_finish_starts_each_solve_when_a_slot_frees() -> None:
    # Slots [0, 0]: 3 -> ends 3; 1 -> ends 1; 2 takes the slot free at 1 -> 3;
    # 2 takes a slot free at 3 -> 5.
    assert ideal_finish([3.0, 1.0, 2.0, 2.0], 2) == [3.0, 1.0, 3.0, 5.0]
    assert ideal_finish([2.0, 1.0], 50) == [2.0, 1.0]  # more threads than solves
    assert ideal_finish([], 5) == []


def test_zero_overhead_bound() -> None:
    # 4 solves end by t=5 on T=2, L=2: 4 / (T/L x 5) = 0.8 of T/L.
    assert zero_overhead_fraction([3.0, 1.0, 2.0, 2.0], 2, 2.0) == 0.8
    # Fewer solves than threads: the ramp alone caps the run at N/T of T/L.
    assert zero_overhead_fraction([2.0, 2.0], 4, 2.0) == 0.5
    assert zero_overhead_fraction([], 2, 2.0) is None


def test_busy_seconds_clip_each_captcha_to_the_interval() -> None:
    # Inside [1002, 1004]: a 0, b 1, c 2, d 0.
    assert busy_seconds(SCHEDULE, 1002.0, 1004.0) == 3.0
    # 2 + 3 + 2 + 1 solver seconds in all, over 2 threads x 5 s.
    assert utilisation(SCHEDULE, 2, 1000.0, 1005.0) == 0.8
    assert utilisation(SCHEDULE, 2, 1000.0, 1000.0) is None


def test_steady_state_utilisation_spans_first_to_last_submit() -> None:
    # Backlog from 1000 to 1004: a 2 + b 3 + c 2 + d 0 = 7 solver seconds of 2 x 4.
    assert backlogged_utilisation(SCHEDULE, 2) == 0.875
    # No more submits than threads: nothing ever waited, no steady state.
    assert backlogged_utilisation(SCHEDULE[:2], 2) is None
    assert backlogged_utilisation(SCHEDULE, 4) is None


def test_run_window_keeps_this_runs_captchas_in_submit_order() -> None:
    earlier = captcha("warm-up", 990.0, 992.0)
    shuffled = [SCHEDULE[3], earlier, SCHEDULE[2], SCHEDULE[0], SCHEDULE[1]]
    window = run_window(shuffled, t0=1000.0005)  # 1 ms of slack for rounded times
    assert [c["id"] for c in window] == ["a", "b", "c", "d"]


def test_refill_gaps_measure_from_the_freed_thread() -> None:
    # c came as a's thread freed (1002): 0 s; d came at 1004, a second after b freed.
    assert refill_gaps(SCHEDULE, 2, enqueue_end=1000.25) == [0.0, 1.0]
    # While enqueueing lasts the gap counts from its end: c, sent during it, is early.
    assert refill_gaps(SCHEDULE, 2, enqueue_end=1003.5) == [-1.5, 0.5]


def test_solve_metrics_on_a_hand_computed_run() -> None:
    """T=1, L=1 s. A and B succeed, C fails, D never finishes.

    A: enqueued 100, submitted 100.5, ready 101.5, answered 101.75, result 102
    B: enqueued 100.25, submitted 101.75, ready 102.75, answered 103, result 103.5
    """
    enqueued = {"A": 100.0, "B": 100.25, "C": 100.25, "D": 100.25}
    outcomes = {
        "A": Outcome(102.0, "SUCCESS", {"captcha_id": "1"}),
        "B": Outcome(103.5, "SUCCESS", {"captcha_id": "2"}),
        "C": Outcome(102.5, "FAILURE", None),
        "elsewhere": Outcome(101.0, "SUCCESS", {"captcha_id": "9"}),  # not this run's
    }
    captchas = [
        captcha("1", 100.5, 101.5, 101.75, polls=2),
        captcha("2", 101.75, 102.75, 103.0, polls=3),
    ]
    m = solve_metrics(
        threads=1,
        latency=1.0,
        tasks=4,
        enqueued=enqueued,
        enqueue_end=100.25,
        outcomes=outcomes,
        captchas=captchas,
        stats={"polls": 5, "solved": 2, "submitted": 2, "max_in_flight": 1},
        cpu={"workers": 0.5, "machine_busy": 1.0, "machine_total": 4.0},
        admitted={"A": 100.125, "B": 100.375},
    )
    assert (m["completed"], m["failures"], m["unfinished"], m["matched_to_sandbox"]) == (2, 1, 1, 2)
    assert m["makespan_seconds"] == 3.5  # 100 -> 103.5
    assert m["solves_per_second"] == m["fraction_of_t_over_l"] == 0.5714  # 2 / 3.5
    # Zero overhead: 1 s each, back to back on one thread, so 2 solves by t=2.
    assert m["ideal_fraction_for_these_latencies"] == 1.0
    assert m["lateness_vs_ideal_p50"] == 1.25  # A 102 vs 101, B 103.5 vs 102
    assert m["sandbox_utilisation"] == 0.5714  # 2 solver seconds / 3.5
    assert m["sandbox_utilisation_backlogged"] == 0.8  # A's 1 s of 100.5 -> 101.75
    assert m["slot_refill_gap_p50"] == 0.25  # A ready 101.5, B submitted 101.75
    assert m["enqueue_to_submit_p50"] == 1.0  # 0.5 and 1.5
    assert m["enqueue_to_admitted_p50"] == 0.125
    assert m["e2e_minus_latency_p50"] == 1.625  # 1.0 and 2.25
    assert m["collection_delay_p50"] == 0.625  # ready -> stored: 0.5 and 0.75
    assert m["collection_delay_p95"] == pytest.approx(0.7375, abs=1e-4)
    assert m["ready_to_answered_p50"] == 0.25
    assert m["answered_to_result_p50"] == 0.375  # 0.25 and 0.5
    assert (m["captcha_polled_mean"], m["captcha_polled_max"]) == (2.5, 3)
    assert m["captcha_polled_mean_later"] == 3  # the later half by submit: B
    assert m["polls_per_solve"] == 2.5
    assert m["worker_cpu_per_solve"] == 0.25
    assert m["machine_cpu_busy"] == 0.25
    assert m["first_submit_seconds"] == 0.5
    assert m["t_th_submit_seconds"] == 0.5  # T=1: the first submit is the T-th


def test_solve_metrics_without_results_or_captchas() -> None:
    m = solve_metrics(
        threads=2,
        latency=1.0,
        tasks=1,
        enqueued={"A": 50.0},
        enqueue_end=50.0,
        outcomes={},
        captchas=[],
        stats={},
        cpu={},
    )
    assert (m["completed"], m["unfinished"], m["makespan_seconds"]) == (0, 1, 0.0)
    for key in (
        "solves_per_second",
        "ideal_fraction_for_these_latencies",
        "sandbox_utilisation",
        "sandbox_utilisation_backlogged",
        "collection_delay_p50",
        "worker_cpu_per_solve",
        "machine_cpu_busy",
    ):
        assert m[key] is None, key


def page(status: int = 200, solved: bool = False, source: str | None = None) -> dict[str, Any]:
    """A fetch_page result."""
    return {
        "status": status,
        "url": "http://127.0.0.1:1/page/x",
        "solved": solved,
        "source": source,
    }


def test_failure_reason_of_each_kind_of_outcome() -> None:
    assert failure_reason(Outcome(1.0, "SUCCESS", page())) is None
    assert failure_reason(Outcome(1.0, "SUCCESS", page(403))) == "HTTP 403"
    assert failure_reason(Outcome(1.0, "SUCCESS", None)) == "HTTP None"
    raised = {"exc_type": "ChallengeRejected", "exc_message": ["refused (HTTP 403)"]}
    assert failure_reason(Outcome(1.0, "FAILURE", raised)) == (
        "ChallengeRejected: refused (HTTP 403)"
    )
    assert failure_reason(Outcome(1.0, "REVOKED", None)) == "REVOKED"
    assert failure_reason(None) == "not finished by the deadline"
    long = failure_reason(Outcome(1.0, "FAILURE", {"exc_type": "E", "exc_message": "x" * 500}))
    assert long is not None and len(long) == 160 and long.endswith("...")


def test_page_metrics_on_a_hand_computed_run() -> None:
    """Five pages enqueued from t=100: A solves (api), B and C reuse the cookie, D fails,
    E never finishes; a result of another run is ignored."""
    enqueued = {"A": 100.0, "B": 100.25, "C": 100.25, "D": 100.5, "E": 100.5}
    outcomes = {
        "A": Outcome(102.0, "SUCCESS", page(solved=True, source="api")),
        "B": Outcome(102.5, "SUCCESS", page()),
        "C": Outcome(103.25, "SUCCESS", page()),
        "D": Outcome(101.0, "FAILURE", {"exc_type": "SessionLockTimeout", "exc_message": []}),
        "elsewhere": Outcome(110.0, "SUCCESS", page(solved=True, source="api")),
    }
    m = page_metrics(
        pages=5,
        enqueued=enqueued,
        enqueue_end=100.5,
        outcomes=outcomes,
        solver_stats={"submitted": 2, "solved": 2},
        demo_stats={"challenges": 9, "tokens_accepted": 1, "tokens_rejected": 1, "pages_served": 3},
        cpu={"workers": 0.6, "redis": 0.1, "machine_busy": 1.0, "machine_total": 8.0},
        retries=7,
    )
    assert (m["pages_ok"], m["failures"]) == (3, 2)
    assert (m["failed_tasks"], m["other_status"], m["unfinished"]) == (1, 0, 1)
    assert m["failure_reasons"] == {"SessionLockTimeout": 1, "not finished by the deadline": 1}
    assert (m["solves_submitted"], m["results_solved_true"]) == (2, 1)
    assert m["solves_per_page"] == 0.4
    assert (m["source_api"], m["source_pool"], m["source_none"]) == (1, 0, 2)
    assert (m["challenges"], m["tokens_accepted"], m["tokens_rejected"]) == (9, 1, 1)
    assert m["pages_served"] == 3
    assert m["task_retries"] == 7
    assert m["enqueue_seconds"] == 0.5
    assert m["wall_seconds"] == 3.25  # 100 -> C at 103.25 (the other run's result ignored)
    assert m["pages_per_second"] == round(3 / 3.25, 4)
    assert (m["page_seconds_p50"], m["page_seconds_max"]) == (2.25, 3.0)  # 2, 2.25, 3
    assert m["worker_cpu_per_page"] == 0.2
    assert m["machine_cpu_busy"] == 0.125


def test_page_metrics_without_results() -> None:
    m = page_metrics(
        pages=2,
        enqueued={"A": 100.0, "B": 100.0},
        enqueue_end=100.0,
        outcomes={},
        solver_stats={},
        demo_stats={},
        cpu={},
    )
    assert (m["pages_ok"], m["failures"], m["unfinished"]) == (0, 2, 2)
    assert m["failure_reasons"] == {"not finished by the deadline": 2}
    assert m["wall_seconds"] == 0.0
    assert m["pages_per_second"] is None and m["worker_cpu_per_page"] is None
    assert m["page_seconds_p50"] is None and m["machine_cpu_busy"] is None


def test_cpu_figures_round_each_and_divide_the_workers_by_what_they_did() -> None:
    cpu = {
        "workers": 1.23456,
        "redis": 0.12345,
        "sandbox": 2.0,
        "harness": 0.5,
        "machine_busy": 3.0,
        "machine_total": 8.0,
    }
    assert cpu_figures(cpu, "page", 4) == {
        "worker_cpu_seconds": 1.235,
        "worker_cpu_per_page": 0.30864,
        "redis_cpu_seconds": 0.123,
        "sandbox_cpu_seconds": 2.0,
        "harness_cpu_seconds": 0.5,
        "machine_cpu_busy": 0.375,
    }
    none = cpu_figures({}, "solve", 0)
    assert none["worker_cpu_per_solve"] is None and none["machine_cpu_busy"] is None
    assert none["worker_cpu_seconds"] == 0.0


def test_report_table_lays_out_columns_sections_and_missing_values() -> None:
    rows = [
        section("counts"),
        Row("done / total", fields("done", "total")),
        Row("share", field("share", ".0%")),
        Row("  mean / max", joined(field("mean", ".2f"), field("max", "d"))),
    ]
    columns = [
        {"label": "first", "done": 3, "total": 4, "share": 0.75, "mean": 1.5, "max": 2},
        {
            "label": "a longer label",
            "done": 0,
            "total": 4,
            "share": None,
            "mean": None,
            "max": None,
        },
    ]
    lines = render_report(["intro"], {"CAPTCHA_TASKS_X": "1"}, rows, columns)
    # Labels 12 wide + 2; each column as wide as its widest cell or header + 2.
    assert lines == [
        "intro",
        "environment passed to the workers: {'CAPTCHA_TASKS_X': '1'}",
        "",
        "                   first  a longer label",
        "-- counts ------------------------------",
        "done / total       3 / 4           0 / 4",
        "share                75%               -",
        "  mean / max    1.50 / 2           - / -",
    ]
    assert render_report([], {}, rows[:1], []) == ["", "        ", "-- counts "]
