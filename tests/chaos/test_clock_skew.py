"""The fault suite's clock-skew row: one worker whose clock is 30 s ahead of the others.

Three workers share a private Redis; the third runs with
``CAPTCHA_TASKS_TEST_CLOCK_OFFSET=30`` (``captcha_tasks.state.clock``: the test aid that
moves every read of the host's clock in the package by that much, as on a host whose
clock is off). Under steady load it admits, submits, polls and ends jobs beside the
others, and, mid-run, a process with the same clock writes a shared cookie that a
process with the right clock then replaces. The row's promise, beside the suite's usual
one (nothing lost, no duplicate submit, every task solved: no typed error at all here,
bounded provider requests, no leak):

- no claim or lease is taken early: no engine takes over a job as if its engine had
  died (there is no crash in this row), and the thread budget holds (the sandbox has
  exactly the budget's threads: a "no free slot" answer means a lease was dropped early);
- learned ready times stay sane: every sample lies between 0 and the deadline (a sample
  measured across the two clocks is 30 s off one way or the other);
- the cookie rule holds: the later write wins, whatever the writers' clocks say.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable

import pytest
import redis
import requests

from captcha_tasks.engine.timing import DEADLINE, LEARN_QUANTILE, quantile
from captcha_tasks.session.cookies import CookieStore
from captcha_tasks.state import Keys, redis_client
from captcha_tasks.state.clock import TEST_CLOCK_OFFSET_ENV
from tests.chaos.harness import KINDS, ROOT, Cluster, Row, sized
from tests.chaos.test_faults import RESULT_TIMEOUT, check, steady

pytestmark = [pytest.mark.integration, pytest.mark.chaos, pytest.mark.timeout(sized(170, 300))]

SKEWED = "chaos3@127.0.0.1"
ENGINE = f"engine@{SKEWED}"
OFFSET = 30.0
HOST = "shop.example.com"
#: Log lines of an engine taking over a job whose engine it takes for dead.
TAKEOVERS = ("taken but never sent by a stopped engine", "which stopped: failed it")

#: What a process whose clock is off writes into the shared jar (run with its offset).
WRITE_COOKIE = f"""
import requests
from captcha_tasks.session.cookies import CookieStore
from captcha_tasks.settings import Settings
from captcha_tasks.state import state_redis
settings = Settings.from_env()
session = requests.Session()
session.cookies.set("sid", "written-by-the-fast-clock", domain="{HOST}", path="/")
print(CookieStore(state_redis(settings), settings).merge(session, "{HOST}"))
"""


def _cookie_race(c: Cluster) -> str:
    """A process 30 s ahead writes ``sid``; a second later this one (right clock) writes
    it again: the jar must hold the later write. Returns the value it holds."""
    env = {**c.worker_env(), TEST_CLOCK_OFFSET_ENV: str(OFFSET)}
    done = subprocess.run(
        [sys.executable, "-c", WRITE_COOKIE],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    time.sleep(1.0)
    store = CookieStore(redis_client(c.settings, c.redis.url), c.settings)
    session = requests.Session()
    session.cookies.set("sid", "written-later-by-the-right-clock", domain=HOST, path="/")
    store.merge(session, HOST)
    (cookie,) = [k for k in store.load(HOST) if k.name == "sid"]
    return cookie.value


def _samples(raw: redis.Redis, keys: Keys) -> dict[str, list[float]]:
    return {kind: [float(v) for v in raw.lrange(keys.timing(kind), 0, -1)] for kind in KINDS}


def test_one_worker_clock_thirty_seconds_ahead(cluster: Callable[..., Cluster]) -> None:
    c = cluster(workers=2, concurrency=2)
    c.start_worker(SKEWED, env={TEST_CLOCK_OFFSET_ENV: str(OFFSET)})
    seconds = sized(20.0, 40.0)
    kept: list[str] = []

    def fault() -> str:
        time.sleep(seconds / 2)
        kept.append(_cookie_race(c))
        return (
            f"{SKEWED} runs with its clock {OFFSET:+.0f} s off, beside two right "
            "ones; mid-run a process as far ahead writes a shared cookie that one "
            "with the right clock replaces a second later"
        )

    load = steady(c, fault, sized(80, 200), seconds)
    c.wait_results(load.ids, RESULT_TIMEOUT)  # so that the figures below see the end
    raw = redis.Redis(host=c.redis.host, port=c.redis.port, socket_timeout=5)
    keys = Keys(c.settings.key_prefix)
    samples = _samples(raw, keys)
    # Every engine submits (one reads, the provider's reader, which may or may not be
    # the skewed one): the jobs its engine sent are its part in the run.
    sent_by_skewed = sum(
        1
        for key in raw.scan_iter(match=keys.job("*"), count=500)
        if raw.hget(key, "sender") == ENGINE.encode()
    )
    takeovers = sum(w.log().count(line) for w in c.workers.values() for line in TAKEOVERS)
    no_slot = int(c.sandbox_stats().get("no_slot", 0))
    learned = {kind: round(quantile(v, LEARN_QUANTILE), 3) for kind, v in samples.items() if v}
    notes = [
        f"its engine sent {sent_by_skewed} job(s)",
        f"{takeovers} early takeover(s)",
        f"learned first-poll quantiles {learned}",
        f"cookie kept: {kept[0] if kept else '?'}",
    ]
    row = Row("Clock 30 s ahead on one worker", c.note, notes=", ".join(notes))
    row = c.finish(row, load, timeout=RESULT_TIMEOUT)
    print(f"\nready-time samples: { {k: (min(v), max(v)) for k, v in samples.items() if v} }")
    check(row, requests_per_task=6)
    assert sent_by_skewed > 0, "the skewed worker's engine took no part"
    assert takeovers == 0, "a live engine's claim was taken as if it had died"
    assert no_slot == 0, f"{no_slot} 'no free slot' answers: a lease was dropped early"
    scale = c.time_scale
    for kind, values in samples.items():
        assert values, f"nothing learned for {kind}"
        bad = [v for v in values if not 0.0 <= v <= DEADLINE[kind] * scale]
        assert not bad, f"{kind}: ready times measured across two clocks: {bad}"
    assert kept == ["written-later-by-the-right-clock"], kept
