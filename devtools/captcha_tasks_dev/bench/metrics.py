"""The solve benchmark's figures: pure computation over the timings a run collected.

Every time is in epoch seconds of one machine's clock: the harness's enqueue and
result times, and the sandbox's per-captcha submit, ready and first-answered times
(``GET /admin/captchas``), so they compare directly. Nothing here does I/O.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from captcha_tasks.engine.timing import quantile

from .plot import completion_series

__all__ = [
    "LEAD_FIGURES",
    "Outcome",
    "backlogged_utilisation",
    "busy_seconds",
    "cpu_figures",
    "failure_reason",
    "ideal_finish",
    "lead_ratios",
    "page_metrics",
    "percentile",
    "refill_gaps",
    "run_window",
    "solve_metrics",
    "utilisation",
    "zero_overhead_fraction",
]

#: A captcha as ``GET /admin/captchas`` lists it.
Captcha = Mapping[str, Any]


@dataclasses.dataclass
class Outcome:
    """A task's final state as the result backend published it."""

    at: float
    status: str
    result: Any


def _finite(x: float) -> float | None:
    return round(x, 4) if math.isfinite(x) else None


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q`` quantile (linear between neighbours), to 0.1 ms; None without values."""
    return round(quantile(values, q), 4) if values else None


def ideal_finish(latencies: Sequence[float], threads: int) -> list[float]:
    """When each of these solves (in order) would end on ``threads`` slots with zero
    overhead: each starts the moment a slot frees, all available at time 0."""
    slots = [0.0] * min(threads, max(len(latencies), 1))
    finish = []
    for latency in latencies:
        end = heapq.heappop(slots) + latency
        finish.append(end)
        heapq.heappush(slots, end)
    return finish


def zero_overhead_fraction(
    latencies: Sequence[float], threads: int, latency: float
) -> float | None:
    """Throughput over T/L of the zero-overhead schedule of these latencies: the most a
    whole run (ramp-up and tail included) could reach; None without latencies."""
    ideal = max(ideal_finish(latencies, threads), default=0.0)
    return _finite(len(latencies) / (threads / latency * ideal)) if ideal > 0 else None


def busy_seconds(captchas: Sequence[Captcha], start: float, end: float) -> float:
    """Solver seconds spent inside [start, end] (each captcha from submit to ready)."""
    return sum(
        max(0.0, min(float(c["ready_at"]), end) - max(float(c["submitted_at"]), start))
        for c in captchas
    )


def utilisation(
    captchas: Sequence[Captcha], threads: int, start: float, end: float
) -> float | None:
    """Solver seconds inside [start, end] over the ``threads`` slots' seconds there."""
    span = end - start
    return _finite(busy_seconds(captchas, start, end) / (threads * span)) if span > 0 else None


def run_window(captchas: Sequence[Captcha], t0: float) -> list[Captcha]:
    """Every captcha the run sent (submitted from ``t0`` on, duplicates included), in
    submit order; the millisecond of slack absorbs rounding of the sandbox's times."""
    return sorted(
        (c for c in captchas if float(c["submitted_at"]) >= t0 - 1e-3),
        key=lambda c: float(c["submitted_at"]),
    )


def backlogged_utilisation(window: Sequence[Captcha], threads: int) -> float | None:
    """Steady-state utilisation: with more than T submits, a backlog waited from the
    first submit to the last, when every thread could have been busy; the share of
    their seconds the solver spent solving. None when the run never needed more than T.
    ``window`` is in submit order (:func:`run_window`)."""
    if len(window) <= threads:
        return None
    first, last = float(window[0]["submitted_at"]), float(window[-1]["submitted_at"])
    return utilisation(window, threads, first, last)


def refill_gaps(window: Sequence[Captcha], threads: int, enqueue_end: float) -> list[float]:
    """A submit beyond the T-th needs a freed thread: the k-th submit can come at the
    earliest when the (k-T)-th captcha became ready (or, if later, once everything was
    enqueued). How long after did each come? ``window`` is in submit order."""
    submits = [float(c["submitted_at"]) for c in window]
    readies = sorted(float(c["ready_at"]) for c in window)
    return [s - max(r, enqueue_end) for s, r in zip(submits[threads:], readies, strict=False)]


def cpu_figures(cpu: Mapping[str, float], unit: str, done: int) -> dict[str, Any]:
    """The CPU figures of a run from the CPU seconds it used (``workers``, ``redis``,
    ``sandbox``, ``harness``, ``machine_busy`` of ``machine_total``): each rounded, the
    workers' per ``unit`` (``worker_cpu_per_<unit>``; ``done`` of them), the machine's
    busy share."""
    workers = cpu.get("workers", 0.0)
    machine_total = cpu.get("machine_total", 0.0)
    return {
        "worker_cpu_seconds": round(workers, 3),
        f"worker_cpu_per_{unit}": round(workers / done, 5) if done else None,
        "redis_cpu_seconds": round(cpu.get("redis", 0.0), 3),
        "sandbox_cpu_seconds": round(cpu.get("sandbox", 0.0), 3),
        "harness_cpu_seconds": round(cpu.get("harness", 0.0), 3),
        "machine_cpu_busy": (
            round(cpu.get("machine_busy", 0.0) / machine_total, 3) if machine_total else None
        ),
    }


def solve_metrics(
    *,
    threads: int,
    latency: float,
    tasks: int,
    enqueued: Mapping[str, float],
    enqueue_end: float,
    outcomes: Mapping[str, Outcome],
    captchas: Sequence[Captcha],
    stats: Mapping[str, Any],
    cpu: Mapping[str, float],
    admitted: Mapping[str, float] | None = None,
) -> dict[str, Any]:
    """One design's figures (flat, JSON-ready, None when n/a) from what its run collected:
    enqueue times and final outcomes by task id, the sandbox's captchas and ``/stats``,
    CPU seconds used (``workers``, ``redis``, ``sandbox``, ``harness``, ``machine_busy``
    of ``machine_total``) and, for ours, when each job was admitted."""
    T, L = threads, latency
    t0 = min(enqueued.values())
    done = {tid: o for tid, o in outcomes.items() if tid in enqueued}
    ok = {tid: o for tid, o in done.items() if o.status == "SUCCESS"}
    t_end = max((o.at for o in done.values()), default=t0)
    # Both designs' results carry the captcha id: the key to the sandbox's times.
    cid_of = {
        tid: str(o.result.get("captcha_id", "")) if isinstance(o.result, dict) else ""
        for tid, o in ok.items()
    }
    by_id = {_result_id(c): c for c in captchas}
    matched, (over, waits, collect, late, store, admit) = _delays(
        ok, enqueued, by_id, cid_of, L, admitted
    )
    window = run_window(captchas, t0)
    reached_t = int(stats.get("max_in_flight", 0)) >= T
    gaps = refill_gaps(window, T, enqueue_end) if reached_t else []
    latencies = [float(c["latency"]) for c in window]
    lateness = _lateness(ok, cid_of, window, latencies, T, t0)

    return {
        "tasks": tasks,
        "completed": len(ok),
        "failures": len(done) - len(ok),
        "unfinished": tasks - len(done),
        "matched_to_sandbox": matched,
        "enqueue_seconds": round(enqueue_end - t0, 3),
        **_schedule_figures(window, len(ok), T, L, t0, t_end),
        **_p50_p95("e2e_minus_latency", over),
        **_p50_p95("enqueue_to_submit", waits),
        **_p50_p95("enqueue_to_admitted", admit),
        **_p50_p95("lateness_vs_ideal", lateness),
        **_p50_p95("slot_refill_gap", gaps),
        "slot_refill_gap_mean": round(sum(gaps) / len(gaps), 4) if gaps else None,
        **_p50_p95("collection_delay", collect),
        **_p50_p95("ready_to_answered", late),
        **_p50_p95("answered_to_result", store),
        **_sandbox_figures(stats, window, tasks),
        "threads": T,
        **cpu_figures(cpu, "solve", len(ok)),
        "series_seconds": round(L / 2, 4),
        "completions_series": completion_series((o.at for o in ok.values()), t0, L / 2),
    }


def _schedule_figures(
    window: Sequence[Captcha], solved: int, T: int, L: float, t0: float, t_end: float
) -> dict[str, Any]:
    """Ramp-up, throughput against T/L and the sandbox's utilisation, ``solved`` results
    coming in from ``t0`` to ``t_end``."""
    submits = [float(c["submitted_at"]) for c in window]
    latencies = [float(c["latency"]) for c in window]
    makespan = t_end - t0
    return {
        # Ramp-up: the zero-overhead schedule has all T threads busy from the first enqueue.
        "first_submit_seconds": round(submits[0] - t0, 4) if submits else None,
        "t_th_submit_seconds": round(submits[T - 1] - t0, 4) if len(submits) >= T else None,
        "makespan_seconds": round(makespan, 3),
        "solves_per_second": _finite(solved / makespan) if makespan > 0 else None,
        "fraction_of_t_over_l": _finite(solved / (T / L * makespan)) if makespan > 0 else None,
        "ideal_fraction_for_these_latencies": zero_overhead_fraction(latencies, T, L),
        "sandbox_utilisation": utilisation(window, T, t0, t_end),
        "sandbox_utilisation_backlogged": backlogged_utilisation(window, T),
        "solver_latency_mean": round(sum(latencies) / len(latencies), 4) if latencies else None,
    }


def _result_id(captcha: Captcha) -> str:
    """The id a result names ``captcha`` by: a JSON task known by another id than its
    captcha's number (CapSolver's UUIDs) has it as ``task_id``."""
    return str(captcha.get("task_id", captcha["id"]))


def _lateness(
    ok: Mapping[str, Outcome],
    cid_of: Mapping[str, str],
    window: Sequence[Captcha],
    latencies: Sequence[float],
    threads: int,
    t0: float,
) -> list[float]:
    """How much later than in the zero-overhead schedule each result came."""
    finish = ideal_finish(latencies, threads)
    ideal_end = {_result_id(c): t0 + f for c, f in zip(window, finish, strict=True)}
    return [o.at - ideal_end[cid_of[t]] for t, o in ok.items() if cid_of[t] in ideal_end]


def _p50_p95(name: str, values: Sequence[float]) -> dict[str, float | None]:
    return {f"{name}_p50": percentile(values, 0.5), f"{name}_p95": percentile(values, 0.95)}


def _delays(
    ok: Mapping[str, Outcome],
    enqueued: Mapping[str, float],
    by_id: Mapping[str, Captcha],
    cid_of: Mapping[str, str],
    latency: float,
    admitted: Mapping[str, float] | None,
) -> tuple[int, tuple[list[float], ...]]:
    """How many results matched a sandbox captcha, and the seconds of each successful
    task: end to end beyond the solver's latency, enqueue to submit, ready to collected,
    ready to answered, answered to result stored, enqueue to admitted."""
    over: list[float] = []
    waits: list[float] = []
    collect: list[float] = []
    late: list[float] = []
    store: list[float] = []
    admit: list[float] = []
    matched = 0
    for tid, o in ok.items():
        e = enqueued[tid]
        c = by_id.get(cid_of[tid])
        if c is None:
            over.append(o.at - e - latency)
            continue
        matched += 1
        over.append(o.at - e - float(c["latency"]))
        waits.append(float(c["submitted_at"]) - e)
        collect.append(o.at - float(c["ready_at"]))
        if c.get("answered_at") is not None:
            late.append(float(c["answered_at"]) - float(c["ready_at"]))
            store.append(o.at - float(c["answered_at"]))
        if admitted and tid in admitted:
            admit.append(admitted[tid] - e)
    return matched, (over, waits, collect, late, store, admit)


def _mean_polls(captchas: Sequence[Captcha]) -> float | None:
    return round(sum(int(c["polls"]) for c in captchas) / len(captchas), 3) if captchas else None


def _sandbox_figures(
    stats: Mapping[str, Any], window: Sequence[Captcha], tasks: int
) -> dict[str, Any]:
    """What the sandbox counted: polls, submits, duplicates, its busiest moment."""
    solved = int(stats.get("solved", 0))
    return {
        "polls": int(stats.get("polls", 0)),
        "solved_at_sandbox": solved,
        "polls_per_solve": round(int(stats.get("polls", 0)) / solved, 3) if solved else None,
        "captcha_polled_mean": _mean_polls(window),
        "captcha_polled_max": max((int(c["polls"]) for c in window), default=None),
        # Once the ready times are learned: the later half of the captchas, by submit.
        "captcha_polled_mean_later": _mean_polls(window[len(window) // 2 :]),
        "submitted": int(stats.get("submitted", 0)),
        "submits_per_task": round(int(stats.get("submitted", 0)) / tasks, 3) if tasks else None,
        "duplicates": int(stats.get("duplicates", 0)),
        "no_slot": int(stats.get("no_slot", 0)),
        "max_in_flight": int(stats.get("max_in_flight", 0)),
    }


#: The figures our lead over another design is stated by: the figure's key, and its name
#: in a report. Each ratio is ours / theirs: above 1 for throughput is a lead, below 1
#: for the others.
LEAD_FIGURES: dict[str, str] = {
    "fraction_of_t_over_l": "throughput, whole run",
    "sandbox_utilisation_backlogged": "throughput, steady state",
    "polls_per_solve": "reads per solve",
    "collection_delay_p50": "collect delay p50",
    "collection_delay_p95": "collect delay p95",
    "worker_cpu_per_solve": "worker CPU per solve",
}


def lead_ratios(ours: Mapping[str, Any], theirs: Mapping[str, Any]) -> dict[str, float | None]:
    """Each of :data:`LEAD_FIGURES`, ours over theirs measured in the same run, to 0.01;
    None where either is missing or theirs is zero."""
    out: dict[str, float | None] = {}
    for key in LEAD_FIGURES:
        a, b = ours.get(key), theirs.get(key)
        out[key] = round(a / b, 2) if a is not None and b else None
    return out


# -- bench pages ------------------------------------------------------------------------

#: Longest failure reason kept in a report.
_REASON_CHARS = 160
#: Distinct failure reasons kept in a report (the most frequent first).
_REASONS_KEPT = 5


def failure_reason(outcome: Outcome | None) -> str | None:
    """Why a page did not count as fetched, or None if it did (SUCCESS with HTTP 200).

    A failed task's result is Celery's exception record (``exc_type``,
    ``exc_message``); a finished one's is ``fetch_page``'s ``{"status", ...}``."""
    if outcome is None:
        return "not finished by the deadline"
    result = outcome.result
    if outcome.status == "SUCCESS":
        status = result.get("status") if isinstance(result, dict) else None
        return None if status == 200 else f"HTTP {status}"
    if isinstance(result, dict) and result.get("exc_type"):
        message = result.get("exc_message")
        if isinstance(message, list | tuple):
            message = " ".join(map(str, message))
        text = f"{result['exc_type']}: {message}" if message else str(result["exc_type"])
    else:
        text = outcome.status
    return text if len(text) <= _REASON_CHARS else text[: _REASON_CHARS - 3] + "..."


def page_metrics(
    *,
    pages: int,
    enqueued: Mapping[str, float],
    enqueue_end: float,
    outcomes: Mapping[str, Outcome],
    solver_stats: Mapping[str, Any],
    demo_stats: Mapping[str, Any],
    cpu: Mapping[str, float],
    retries: int = 0,
) -> dict[str, Any]:
    """One ``bench pages`` run's figures (flat, JSON-ready, None when n/a).

    ``enqueued``: task id -> when ``fetch_page.delay()`` was called; ``outcomes``: the
    final states by task id (others are ignored); ``solver_stats`` and ``demo_stats``:
    the sandbox's and the demo site's ``GET /stats``; ``cpu``: CPU seconds used
    (``workers``, ``redis``, ``sandbox``, ``harness``, ``machine_busy`` of
    ``machine_total``); ``retries``: RETRY states stored (tasks waiting for the lock).
    A page is ok when its task succeeded with HTTP 200."""
    t0 = min(enqueued.values(), default=enqueue_end)
    done = {tid: o for tid, o in outcomes.items() if tid in enqueued}
    reasons = {tid: failure_reason(done.get(tid)) for tid in enqueued}
    ok = [tid for tid, reason in reasons.items() if reason is None]
    results = [o.result for o in done.values() if o.status == "SUCCESS"]
    results = [r for r in results if isinstance(r, dict)]
    sources = Counter(str(r.get("source") or "none") for r in results)
    t_end = max((o.at for o in done.values()), default=t0)
    wall = t_end - t0
    page_times = [done[tid].at - enqueued[tid] for tid in ok]
    submitted = int(solver_stats.get("submitted", 0))
    failed = Counter(r for r in reasons.values() if r is not None)
    return {
        "pages": pages,
        "pages_ok": len(ok),
        "failures": pages - len(ok),
        "failed_tasks": sum(1 for o in done.values() if o.status != "SUCCESS"),
        "other_status": sum(1 for o in done.values() if o.status == "SUCCESS") - len(ok),
        "unfinished": pages - len(done),
        "failure_reasons": dict(failed.most_common(_REASONS_KEPT)),
        "solves_submitted": submitted,
        "solves_solved_at_sandbox": int(solver_stats.get("solved", 0)),
        "results_solved_true": sum(1 for r in results if r.get("solved") is True),
        "solves_per_page": round(submitted / pages, 4) if pages else None,
        "source_api": sources.get("api", 0),
        "source_pool": sources.get("pool", 0),
        "source_none": sources.get("none", 0),
        "challenges": int(demo_stats.get("challenges", 0)),
        "tokens_accepted": int(demo_stats.get("tokens_accepted", 0)),
        "tokens_rejected": int(demo_stats.get("tokens_rejected", 0)),
        "pages_served": int(demo_stats.get("pages_served", 0)),
        "cookies_rejected": int(demo_stats.get("cookies_rejected", 0)),
        "task_retries": retries,
        "enqueue_seconds": round(enqueue_end - t0, 3),
        "wall_seconds": round(wall, 3),
        "pages_per_second": _finite(len(ok) / wall) if wall > 0 else None,
        "page_seconds_p50": percentile(page_times, 0.5),
        "page_seconds_p95": percentile(page_times, 0.95),
        "page_seconds_max": round(max(page_times), 4) if page_times else None,
        **cpu_figures(cpu, "page", len(ok)),
    }
