"""The routing benchmark's figures from a run's page records and solve jobs (no
processes): spend per accepted page, A's share of first solves per window, the steady
state, and how many pages (and seconds) cost routing took to go back to A."""

from __future__ import annotations

from typing import Any

import pytest

from captcha_tasks_dev.bench.routing import (
    BACK_SPAN,
    CONVERGED_BY,
    format_routing_report,
    routing_metrics,
)


def _run(firsts: list[str], *, retry_b: set[int] = frozenset()) -> tuple[list[Any], list[Any]]:  # type: ignore[assignment]
    """Pages i = 0.. sent one a second, each ended a second later and served; page i's
    first solve at ``firsts[i]``, then one at b for the pages in ``retry_b``."""
    pages, jobs = [], []
    for i, name in enumerate(firsts):
        pages.append({"i": i, "sent": 1000.0 + i, "ended": 1001.0 + i, "status": 200})
        jobs.append({"page": i, "provider": name, "enqueued_at": 1000.0 + i, "charged": True})
        if i in retry_b:
            jobs.append({"page": i, "provider": "b", "enqueued_at": 1000.5 + i, "charged": True})
    return pages, jobs


def test_spend_shares_and_the_steady_state() -> None:
    firsts = ["a"] * 40 + ["b"] * (CONVERGED_BY - 40) + ["b"] * 100
    pages, jobs = _run(firsts, retry_b={0, 1, 2})
    pages[3]["status"] = None
    pages[3]["error"] = "ChallengeRejected"
    m = routing_metrics(pages, jobs, before=200, changed_at=None, window=50, time_scale=0.1)
    whole = m["whole"]
    assert (whole["pages"], whole["accepted"], whole["solves"], whole["solves_a"]) == (
        200,
        199,
        203,
        40,
    )
    # 40 x $0.001 + 163 x $0.002 over 199 accepted pages.
    assert whole["spend_per_accepted"] == pytest.approx((0.04 + 0.326) / 199)
    assert whole["first_a"] == pytest.approx(0.2)
    assert m["first_a_by_window"] == [0.8, 0.0, 0.0, 0.0]
    steady = m["steady"]
    assert (steady["pages"], steady["first_a"], steady["spend_per_accepted"]) == (100, 0.0, 0.002)
    # 200 pages ended over 200 s: 60 a minute, 6 at the time scale.
    assert whole["pages_per_minute"] == pytest.approx(60.0)
    assert whole["pages_per_minute_scaled"] == pytest.approx(6.0)
    assert (m["failed"], m["broken"]) == (1, 0)
    assert m["back_after_pages"] is None and m["after"] == {}


def test_moving_back_is_the_first_page_from_which_a_takes_most_first_solves() -> None:
    before = ["b"] * 10
    after = ["b", "a"] * 10 + ["a"] * 15 + ["b"] + ["a"] * 10
    pages, jobs = _run(before + after)
    m = routing_metrics(pages, jobs, before=10, changed_at=1009.5, window=10, time_scale=0.1)
    # From the change on, the first span of BACK_SPAN pages with >= 70% of first solves at
    # a: it starts at the page whose window of 20 holds 14 a's.
    firsts = after
    k = next(
        k for k in range(len(firsts)) if firsts[k : k + BACK_SPAN].count("a") >= 0.7 * BACK_SPAN
    )
    assert m["back_after_pages"] == k == 7  # pages 7-26 after the change: 7 + 7 a's
    assert m["back_after_seconds"] == pytest.approx(1000.0 + 10 + k - 1009.5)
    assert m["back_after_minutes_scaled"] == pytest.approx(round((10 + k - 9.5) / 0.1 / 60, 1))
    assert m["after_back"]["pages"] == len(after) - k
    report = {
        "parameters": {
            "pages": 10,
            "after": len(after),
            "in_flight": 4,
            "workers": 1,
            "concurrency": 2,
            "time_scale": 0.1,
            "recaptcha_v2_seconds": 1.5,
            "acceptance_window": 90.0,
            "cpus": 2,
            "window": 10,
            "environment": {},
        },
        "cost_saving_whole": 0.15,
        "cost_saving_one_token": 0.33,
        "logs": None,
        "wall_seconds": 1.0,
        "runs": {"cost": {"label": "cost", **m}},
    }
    text = format_routing_report(report)
    assert "pages until A takes the first solves back" in text and "15% less" in text
    assert "33% less per accepted page than order routing with one token per page" in text
