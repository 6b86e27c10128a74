"""Polls placed at quantiles of the learned ready times, through a real worker against a
sandbox polled one by one (``CAPTCHA_TASKS_BATCH_POLL=off``: a provider without batch
reads): every captcha solved within 2.7 res.php reads per solve (a fixed grid reads
3.4-3.5 here; ``docs/design/poll-placement.md`` compares the two in paired runs).

The worker's environment still says ``CAPTCHA_TASKS_POLL_PLACEMENT=grid``, a variable no
longer read: the worker starts, says so in its log, and places its polls at quantiles.

Ready times are learned from when requests were sent, not from when their answers were
read: a worker busy while it learned (answers read late) would otherwise learn ready
times too early by its delay, and read too early once it is not busy. The second test
learns with every submit's answer held back 0.6 s and counts with none."""

from __future__ import annotations

from typing import Any

import pytest
import requests

from captcha_tasks import solve_recaptcha_v2
from captcha_tasks_dev.procs import stop_process
from tests.support.workers import worker_env

pytestmark = pytest.mark.integration

V2_KEY = "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-"
#: Enough solves for the learner (8 samples) before counting.
WARMUP = 20
SOLVES = 30


def _polls_per_solve(
    sandbox_factory: Any, worker_factory: Any, *, late_submit_answers: float = 0.0
) -> tuple[float, str]:
    """Reads per solve once learned; ``late_submit_answers``: seconds every submit's
    answer is held back while it learns (none while the solves are counted)."""
    # Ready 1.4-2.6 s after submit at the test scale (the grid would read every 3 poll
    # intervals, 0.15 s, from its first read on).
    late = {"slow_rate": 1.0, "slow_seconds": late_submit_answers, "fault_paths": ("in.php",)}
    sandbox = sandbox_factory(
        threads=30,
        jitter=0.3,
        latency={"recaptcha_v2": 40.0},
        **(late if late_submit_answers else {}),
    )
    worker = worker_factory(
        worker_env(
            sandbox.url,
            CAPTCHA_TASKS_BATCH_POLL="off",
            CAPTCHA_TASKS_POLL_PLACEMENT="grid",
        )
    )
    warm = [solve_recaptcha_v2.delay(V2_KEY, f"https://e.com/w{i}") for i in range(WARMUP)]
    assert all(r.get(timeout=60)["solution"] for r in warm)
    if late_submit_answers:
        undo = {"slow_rate": 0.0}
        requests.post(f"{sandbox.url}/admin/config", json=undo, timeout=5).raise_for_status()
    sandbox.state.reset()
    results = [solve_recaptcha_v2.delay(V2_KEY, f"https://e.com/{i}") for i in range(SOLVES)]
    got = [r.get(timeout=60) for r in results]
    assert all(r["solution"] for r in got)
    stats = sandbox.stats()
    assert stats["solved"] == SOLVES
    stop_process(worker.proc, timeout=20, group=True)
    return int(stats["polls"]) / SOLVES, worker.log()


@pytest.mark.long
def test_quantile_placement_reads_few_times_without_batch_reads(
    celery_app: Any, sandbox_factory: Any, worker_factory: Any
) -> None:
    quantiles, log = _polls_per_solve(sandbox_factory, worker_factory)
    assert quantiles <= 2.7, quantiles
    assert "CAPTCHA_TASKS_POLL_PLACEMENT is no longer read and is ignored" in log, log


@pytest.mark.long
def test_answers_read_late_while_learning_do_not_make_later_reads_early(
    celery_app: Any, sandbox_factory: Any, worker_factory: Any
) -> None:
    # Every submit's answer held back 0.6 s while it learns, as by a busy worker.
    quantiles, _ = _polls_per_solve(sandbox_factory, worker_factory, late_submit_answers=0.6)
    assert quantiles <= 2.7, quantiles
