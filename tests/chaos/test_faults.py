"""The fault suite: each test is one row of docs/RELIABILITY.md.

Real processes on loopback: a private redis-server with AOF, ``celery worker``
processes, the sandbox (in this process) and, for the SIGKILL row, Flower. Each test
sends solve tasks at a steady rate, injects its fault while they run, waits for every
task to end and checks the row: every task ends with its solution or a typed error,
none is lost, no job is submitted to the provider twice, provider requests stay within
a bound (no retry storm), and the API key and proxy password appear nowhere.

``make test`` runs it at the ``quick`` scale; ``make chaos`` at ``full`` (more tasks,
more rounds) and writes the table (``tests/chaos/report.py``).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tests.chaos.harness import Cluster, Load, Row, rounds, sized
from tests.chaos.providers import TwoProviders

pytestmark = [pytest.mark.integration, pytest.mark.chaos, pytest.mark.timeout(sized(170, 420))]

#: Tasks may wait this long for their results: a SIGKILLed worker's reserved messages
#: come back after the visibility timeout (20 s here), then solve.
RESULT_TIMEOUT = 90.0


def check(
    row: Row,
    *,
    allowed: set[str] = frozenset(),  # type: ignore[assignment]
    requests_per_task: float,
    solved_at_least: float = 1.0,
    explained_losses: int = 0,
) -> None:
    """The row's promise: nothing lost, no duplicate submit, no leak, typed errors only
    (from ``allowed``), at least ``solved_at_least`` of the tasks solved, and at most
    ``requests_per_task`` provider requests per task. ``explained_losses``: lost tasks
    the row has proven lost to its fault by design (Sentinel's replication window);
    they count as neither solved nor failed."""
    print(f"\n{row.fault}: {row.as_json()}")
    assert row.tasks > 0
    assert row.lost == explained_losses, f"{row.lost} task(s) lost ({explained_losses} explained)"
    assert row.untyped == 0, f"untyped errors: {row.typed_errors}"
    assert row.duplicates == 0, f"{row.duplicates} duplicate submit(s)"
    assert row.leaked == 0, "a secret leaked (see LEAK lines above)"
    unexpected = set(row.typed_errors) - allowed
    assert not unexpected, f"unexpected errors: {row.typed_errors}"
    assert row.solved >= solved_at_least * (row.tasks - explained_losses), row
    assert row.provider_requests <= requests_per_task * row.tasks, (
        f"{row.provider_requests} provider requests for {row.tasks} tasks"
    )


@contextmanager
def flapping(
    cluster: Cluster, on: dict[str, Any], off: dict[str, Any], period: float
) -> Iterator[list[int]]:
    """Switch the sandbox between ``on`` and ``off`` every ``period`` s (bursts)."""
    stop = threading.Event()
    bursts = [0]

    def run() -> None:
        while not stop.is_set():
            cluster.configure_sandbox(**on)
            bursts[0] += 1
            stop.wait(period)
            cluster.configure_sandbox(**off)
            stop.wait(period)

    thread = threading.Thread(target=run, name="flapping", daemon=True)
    thread.start()
    try:
        yield bursts
    finally:
        stop.set()
        thread.join(timeout=10)
        cluster.configure_sandbox(**off)


def steady(cluster: Cluster, fault: Callable[[], str], tasks: int, seconds: float) -> Load:
    """Run ``fault`` while ``tasks`` are sent over ``seconds``; it returns a note."""
    with Load(cluster, tasks, seconds) as load:
        cluster.note = fault()
    return load


# -- processes ------------------------------------------------------------------------


def test_sigkill_workers_at_random_points_under_load(cluster: Callable[..., Cluster]) -> None:
    c = cluster(workers=3, concurrency=2, flower=True)
    n_rounds, seconds = sized(3, 8), sized(10.0, 40.0)
    kills: list[str] = []
    # Jobs a killed worker's engine was sending (in an in.php call) when it died.
    mid_send: set[str] = set()

    def fault() -> str:
        for i in rounds(n_rounds, seconds):
            name = sorted(c.workers)[i % len(c.workers)]
            child = i % 2 == 1
            kills.append(c.kill_worker(name, child_only=child))
            if not child:
                held = c.held_by(f"engine@{name}")
                mid_send.update(job for job, state in held.items() if state == "sending")
                time.sleep(0.5)
                c.start_worker(name, wait=False)  # a supervisor restarts it
        return "; ".join(kills)

    load = steady(c, fault, sized(60, 300), seconds)
    row = c.finish(
        Row("SIGKILL of workers", f"{n_rounds} rounds: {', '.join(kills)}"),
        load,
        timeout=RESULT_TIMEOUT,
    )
    # Every task solved but those whose submit a kill cut off: their in.php call may have
    # reached the provider, so they fail SubmitUncertain instead of being sent again.
    check(
        row,
        allowed={"SubmitUncertain"},
        requests_per_task=6,
        solved_at_least=(row.tasks - len(mid_send)) / row.tasks,
    )
    assert row.typed_errors.get("SubmitUncertain", 0) <= len(mid_send), (row, mid_send)


def test_redis_restart_with_aof_mid_run(cluster: Callable[..., Cluster]) -> None:
    c = cluster(workers=2, time_scale=0.25)
    seconds = sized(10.0, 30.0)

    def fault() -> str:
        time.sleep(seconds / 2)
        down = c.restart_redis()
        return f"redis-server stopped (SIGTERM, AOF) and restarted; down {down:.1f} s"

    load = steady(c, fault, sized(50, 200), seconds)
    row = c.finish(Row("Redis restart (AOF)", c.note), load, timeout=RESULT_TIMEOUT)
    check(row, requests_per_task=6)


def test_redis_outage_of_ten_seconds(cluster: Callable[..., Cluster]) -> None:
    c = cluster(workers=2, time_scale=0.25)
    seconds = sized(16.0, 40.0)

    def fault() -> str:
        time.sleep(3.0)
        down = c.restart_redis(outage=10.0)
        return f"redis-server down {down:.1f} s mid-run, then back with its AOF"

    load = steady(c, fault, sized(60, 200), seconds)
    row = c.finish(Row("Redis outage ~10 s", c.note), load, timeout=RESULT_TIMEOUT)
    # Sends while Redis is away fail in the caller (refused_at_send), loudly: not lost.
    check(row, requests_per_task=6)


# -- provider faults ------------------------------------------------------------------


def test_bursts_of_html_502(cluster: Callable[..., Cluster]) -> None:
    c = cluster(workers=2)
    seconds = sized(10.0, 30.0)

    def fault() -> str:
        with flapping(c, {"fail_rate": 1.0}, {"fail_rate": 0.0}, period=1.5) as bursts:
            time.sleep(seconds)
        return f"{bursts[0]} bursts of 1.5 s where every request gets an HTML 502 page"

    load = steady(c, fault, sized(50, 200), seconds)
    row = c.finish(Row("HTML 502 bursts", c.note), load, timeout=RESULT_TIMEOUT)
    check(row, requests_per_task=8)


def test_answers_slower_than_the_client_timeout(cluster: Callable[..., Cluster]) -> None:
    c = cluster(workers=2, sandbox={"slow_rate": 0.15, "slow_seconds": 3.0})
    load = steady(
        c,
        lambda: "15% of requests answered after 3 s (client timeout 2 s)",
        sized(50, 200),
        sized(8.0, 30.0),
    )
    row = c.finish(Row("Answers slower than the timeout", c.note), load, timeout=RESULT_TIMEOUT)
    # A submit whose answer never came may have been accepted: it fails, typed, and is
    # not sent again (at most once); a slow poll is simply asked again.
    check(row, allowed={"SubmitUncertain"}, requests_per_task=8, solved_at_least=0.6)


def test_no_slot_storms(cluster: Callable[..., Cluster]) -> None:
    # The cluster believes it has 10 threads; the provider has 2 right now.
    c = cluster(workers=2, threads=10, sandbox={"threads": 2})
    load = steady(
        c,
        lambda: "budget 10 threads, provider 2: ERROR_NO_SLOT_AVAILABLE storms",
        sized(40, 150),
        sized(8.0, 30.0),
    )
    row = c.finish(Row("ERROR_NO_SLOT_AVAILABLE storms", c.note), load, timeout=RESULT_TIMEOUT)
    check(row, requests_per_task=5)


def test_zero_balance_captchaai_means_no_free_thread(cluster: Callable[..., Cluster]) -> None:
    # CaptchaAI answers ERROR_ZERO_BALANCE when every thread of the plan is busy.
    c = cluster(
        workers=2, threads=10, sandbox={"threads": 2, "over_limit_code": "ERROR_ZERO_BALANCE"}
    )
    load = steady(
        c,
        lambda: "CaptchaAI dialect: ERROR_ZERO_BALANCE while its 2 threads are busy",
        sized(40, 150),
        sized(8.0, 30.0),
    )
    row = c.finish(Row("ERROR_ZERO_BALANCE (CaptchaAI)", c.note), load, timeout=RESULT_TIMEOUT)
    check(row, requests_per_task=5)


def test_zero_balance_2captcha_fails_fast(cluster: Callable[..., Cluster]) -> None:
    c = cluster(
        workers=2,
        sandbox={"dialect": "2captcha", "balance": 0.0},
        env={"CAPTCHA_TASKS_PROVIDER": "2captcha"},
    )
    load = steady(
        c,
        lambda: "2Captcha dialect, balance 0: ERROR_ZERO_BALANCE on every submit",
        sized(30, 100),
        sized(5.0, 15.0),
    )
    row = c.finish(Row("ERROR_ZERO_BALANCE (2Captcha)", c.note), load, timeout=RESULT_TIMEOUT)
    check(row, allowed={"InsufficientFunds"}, requests_per_task=2, solved_at_least=0.0)
    assert row.typed_errors == {"InsufficientFunds": row.tasks}


def test_unsolvable_captchas(cluster: Callable[..., Cluster]) -> None:
    c = cluster(workers=2, sandbox={"unsolvable_rate": 0.3})
    load = steady(
        c,
        lambda: "30% of captchas answered ERROR_CAPTCHA_UNSOLVABLE",
        sized(50, 200),
        sized(8.0, 30.0),
    )
    row = c.finish(Row("Unsolvable captchas", c.note), load, timeout=RESULT_TIMEOUT)
    # One deliberate resubmit after unsolvable (not billed); a second one fails, typed.
    check(row, allowed={"CaptchaUnsolvable"}, requests_per_task=8, solved_at_least=0.75)


def test_wrong_api_key(cluster: Callable[..., Cluster]) -> None:
    # The key is refused once the workers run (revoked): a worker started with a key the
    # provider refuses does not start at all (tests/integration/test_worker_startup.py).
    c = cluster(workers=2)

    def fault() -> str:
        c.configure_sandbox(refuse_keys=True)
        return "the provider refuses every worker's key (revoked after they started)"

    load = steady(c, fault, sized(30, 100), sized(5.0, 15.0))
    row = c.finish(Row("Wrong API key", c.note), load, timeout=RESULT_TIMEOUT)
    check(row, allowed={"InvalidApiKey"}, requests_per_task=3, solved_at_least=0.0)
    assert row.typed_errors == {"InvalidApiKey": row.tasks}


# -- several providers ----------------------------------------------------------------


def test_one_provider_of_two_down(cluster: Callable[..., Cluster]) -> None:
    # A provider's timings at half speed: its deadlines (45 s and more) outlast the
    # outage, so captchas it had accepted are read after it, not given up.
    c = cluster(
        workers=2,
        time_scale=0.5,
        flower=True,
        threads=10,
        sandbox={"threads": 50},
        backup={"threads": 50},
    )
    assert isinstance(c, TwoProviders)
    seconds, outage = sized(16.0, 40.0), sized(10.0, 20.0)

    def fault() -> str:
        time.sleep(seconds / 4)
        down = c.take_down(outage)
        return f"main (classic) refuses connections for {down:.1f} s mid-run; backup (JSON) healthy"

    load = steady(c, fault, sized(50, 150), seconds)
    row = c.finish(Row("One provider of two down", c.note), load, timeout=RESULT_TIMEOUT)
    by = Counter(captcha["provider"] for captcha in c.sandbox_captchas())
    print(f"\nbreakers after the run: main {c.breaker('main')}, backup {c.breaker('backup')}")
    # A submit cut by the outage may have reached main: it fails, typed, never resent.
    check(row, allowed={"SubmitUncertain"}, requests_per_task=6, solved_at_least=0.9)
    assert by["main"] > 0 and by["backup"] > 0, by
    # Refused connections are transient failures: main's breaker must have opened (its
    # recovery, a half-open probe once the cool-down ends, is tests/integration's).
    logs = "\n".join(w.log() for w in c.workers.values())
    assert "provider main: breaker open for" in logs, "main's breaker never opened"
