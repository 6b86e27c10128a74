"""The providers' read rules through real workers against the sandbox in CapMonster's
dialect (one read per task per 2 s, else ERROR_TOO_MUCH_REQUESTS; 120 reads per task),
with a poll interval configured far below them: the engine spaces its reads itself."""

from __future__ import annotations

import collections
import itertools
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from captcha_tasks import solve_recaptcha_v2
from captcha_tasks.errors import SolveTimeout
from captcha_tasks_sandbox import dev_api_key
from captcha_tasks_sandbox.json_api import JsonApi
from tests.support.workers import TEST_TIME_SCALE, worker_env

pytestmark = pytest.mark.integration

V2_KEY = "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-"
#: What the sandbox enforces for CapMonster (devtools/sandbox/json_tasks.py), unscaled.
READ_INTERVAL = 2.0
MAX_READS = 120


class Answers:
    """Every getTaskResult the sandbox answered: when, for which task, with what code."""

    def __init__(self) -> None:
        self.reads: dict[str, list[float]] = collections.defaultdict(list)
        self.codes: collections.Counter[str] = collections.Counter()
        self._lock = threading.Lock()

    def record(self, body: bytes, answer: dict[str, object]) -> None:
        task = str(json.loads(body or b"{}").get("taskId"))
        with self._lock:
            self.reads[task].append(time.monotonic())
            self.codes[str(answer.get("errorCode") or answer.get("status"))] += 1

    def snapshot(self) -> tuple[dict[str, list[float]], collections.Counter[str]]:
        with self._lock:
            return {k: list(v) for k, v in self.reads.items()}, collections.Counter(self.codes)


@pytest.fixture
def answers(monkeypatch: pytest.MonkeyPatch) -> Iterator[Answers]:
    """Record what the (in-process) sandbox answers to each getTaskResult."""
    seen = Answers()
    handle = JsonApi.handle

    def recording(api: JsonApi, method: str, body: bytes) -> tuple[int, dict[str, object]]:
        status, answer = handle(api, method, body)
        if method == "getTaskResult":
            seen.record(body, answer)
        return status, answer

    monkeypatch.setattr(JsonApi, "handle", recording)
    yield seen


def _env(sandbox: Any) -> dict[str, str]:
    return worker_env(
        sandbox.url,
        CAPTCHA_TASKS_PROVIDER="capmonster",
        CAPTCHA_TASKS_API_KEY=dev_api_key("capmonster"),
        # A thousandth of the default: unchecked, one-by-one polls would come every 0.15 ms.
        CAPTCHA_TASKS_POLL_INTERVAL="0.001",
    )


def _least_gap(reads: dict[str, list[float]]) -> float:
    return min(b - a for times in reads.values() for a, b in itertools.pairwise(times))


def test_aggressive_polling_never_breaks_capmonster_s_read_interval(
    celery_app: Any, sandbox_factory: Any, worker_factory: Any, answers: Answers
) -> None:
    # Ready 2 s after submit at this scale: each task is read several times first.
    sandbox = sandbox_factory(
        protocol="json", dialect="capmonster", jitter=0.0, latency={"recaptcha_v2": 40.0}
    )
    assert sandbox.config.time_scale == TEST_TIME_SCALE
    worker_factory(_env(sandbox))
    results = [solve_recaptcha_v2.delay(V2_KEY, f"https://e.com/poll/{i}") for i in range(3)]
    got = [result.get(timeout=60) for result in results]
    assert all(r["protocol"] == "capmonster" and r["solution"] for r in got)
    reads, codes = answers.snapshot()
    assert codes["ERROR_TOO_MUCH_REQUESTS"] == 0, codes
    assert codes["ready"] == 3 and codes["processing"] >= 3 * 3, codes
    assert len(reads) == 3 and all(len(times) <= MAX_READS for times in reads.values())
    assert _least_gap(reads) >= READ_INTERVAL * TEST_TIME_SCALE
    assert sandbox.stats()["polls"] == sum(codes.values())


def test_a_task_never_ready_stops_within_the_read_cap_with_a_timeout(
    celery_app: Any, sandbox_factory: Any, worker_factory: Any, answers: Answers
) -> None:
    sandbox = sandbox_factory(
        protocol="json", dialect="capmonster", latency={"recaptcha_v2": 100_000.0}
    )
    worker_factory(_env(sandbox))
    started = time.monotonic()
    with pytest.raises(SolveTimeout, match=r"no answer 9 s after submit \(\d+ reads\)") as caught:
        solve_recaptcha_v2.delay(V2_KEY, "https://e.com/never").get(timeout=60)
    # Its deadline (180 s, 9 s here), not a lost task: every read found it processing.
    assert time.monotonic() - started < 30
    reads, codes = answers.snapshot()
    (times,) = reads.values()
    assert set(codes) == {"processing"}, codes
    assert 10 <= len(times) <= MAX_READS
    assert f"({len(times)} reads)" in str(caught.value)
    assert _least_gap(reads) >= READ_INTERVAL * TEST_TIME_SCALE
