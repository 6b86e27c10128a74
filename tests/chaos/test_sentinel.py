"""The fault suite's Redis Sentinel rows: the master SIGKILLed mid-run, the replica
promoted by the sentinels, workers, Flower and the client following it through
``sentinel://`` URLs (tests/chaos/sentinel.py).

Two rows of docs/RELIABILITY.md:

- **Sentinel failover**: a healthy deployment loses its master (twice at full scale:
  the old master comes back as a replica, then the new one is killed). Replication is
  asynchronous, so writes the master acknowledged in the instant before it died may be
  missing on the promoted replica; on loopback that window is a fraction of a
  millisecond, and the row says how many bytes the replica was behind. A task lost
  there would be counted, and must be one whose send returned just before the kill.
- **Sentinel failover, replica behind**: the same after the replica stopped receiving
  anything from the master (``cut_replication``) a second or two before the kill: the
  asynchronous-replication window held open, as with a lagging replica. Everything the
  master acknowledged in it is gone with it, and the row counts it: the tasks accepted
  in the window are lost, exactly those (found by when their send returned, and absent
  from every key of the promoted master), and nothing is submitted twice: a submit
  waits until a replica has its ``sending`` mark (``CAPTCHA_TASKS_REDIS_SENTINEL_WAIT``),
  so no job is sent in the window and then again from the replica's older copy. (With
  the wait off, the first run of this row sent 3 jobs twice.)

docs/RELIABILITY.md explains both below the table.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from tests.chaos.harness import Cluster, Load, Row, sized
from tests.chaos.sentinel import EDGE, SentinelCluster
from tests.chaos.test_faults import RESULT_TIMEOUT, check, steady

pytestmark = [pytest.mark.integration, pytest.mark.chaos, pytest.mark.timeout(sized(200, 420))]


def _failovers(c: SentinelCluster) -> str:
    parts = []
    for event in c.failovers:
        text = (
            f"master SIGKILLed, replica promoted after {event['failover_s']} s "
            f"({event['behind']} bytes behind)"
        )
        if "rejoined_s" in event:
            text += f", old master a replica again {event['rejoined_s']} s after its restart"
        parts.append(text)
    return "; ".join(parts)


def _sent_across(load: Load, at: float) -> set[str]:
    """Tasks whose send was under way at ``at`` (give or take ``EDGE``): Redis may have
    taken them on either side of it."""
    return {i for i, (began, ret) in load.sent_span.items() if began - EDGE <= at <= ret + EDGE}


def test_sentinel_failover_of_the_master(cluster: Callable[..., Cluster]) -> None:
    c = cluster(cls=SentinelCluster, workers=2, time_scale=0.25, flower=True)
    assert isinstance(c, SentinelCluster)
    seconds, kills = sized(12.0, 40.0), sized(1, 2)
    start = time.monotonic()

    def fault() -> str:
        for i in range(kills):
            time.sleep(max(0.0, start + (i + 1) * seconds / (kills + 1) - time.monotonic()))
            c.kill_master(restart_after=1.0)
        return _failovers(c)

    load = steady(c, fault, sized(50, 200), seconds)
    row = c.finish(Row("Sentinel failover", c.note), load, timeout=RESULT_TIMEOUT)
    print(f"\nfailovers: {c.failovers}")
    # A task can only be lost in the asynchronous-replication window: acknowledged by
    # the master just before it died, never received by the replica, gone from Redis.
    assert row.lost == row.explained_losses, (c.lost_ids, c.failovers)
    check(row, requests_per_task=6, explained_losses=row.explained_losses)


def test_sentinel_failover_with_the_replica_behind(cluster: Callable[..., Cluster]) -> None:
    # A backlog (3 threads for ~4 tasks/s): threads free up, and jobs that waited for
    # them are submitted, while the window is open.
    c = cluster(cls=SentinelCluster, workers=2, time_scale=0.1, threads=3)
    assert isinstance(c, SentinelCluster)
    seconds, window = sized(12.0, 30.0), sized(1.0, 2.0)

    def fault() -> str:
        time.sleep(seconds / 2 - window)
        c.cut_replication()
        time.sleep(window)
        c.kill_master(restart_after=1.0)
        return f"replication cut {window:.0f} s before the kill; {_failovers(c)}"

    load = steady(c, fault, sized(50, 200), seconds)
    row = c.finish(Row("Sentinel failover, replica behind", c.note), load, timeout=RESULT_TIMEOUT)
    print(f"\nfailovers: {c.failovers}\nin the window: {len(c.in_window)}, lost: {c.lost_ids}")
    assert c.failovers[0]["behind"] > 0
    # Everything the master acknowledged after the cut is gone with it (every lost task
    # is absent from the promoted master), and nothing acknowledged before it:
    lost = set(c.lost_ids)
    assert lost <= c.in_window, f"lost outside the window: {lost - c.in_window}"
    assert lost == set(c.gone), "a lost task is still in Redis: stuck, not lost"
    assert c.cut_at is not None
    edges = _sent_across(load, c.cut_at) | _sent_across(load, c.failovers[0]["killed_at"])
    assert c.in_window - edges <= lost, "a task sent in the window was not lost?"
    assert row.lost == row.explained_losses
    # A captcha id recorded in the window would be lost too: its job fails
    # SubmitUncertain (the provider has it; it is never sent again): a job submitted in
    # the window, which may have waited for a thread since before it, neither solved nor
    # lost.
    uncertain = row.typed_errors.get("SubmitUncertain", 0)
    counted = row.tasks - row.explained_losses
    check(
        row,
        allowed={"SubmitUncertain"},
        requests_per_task=6,
        solved_at_least=(counted - uncertain) / counted,
        explained_losses=row.explained_losses,
    )
