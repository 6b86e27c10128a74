"""The engine's parts against the session's real redis-server and a fake provider."""

from __future__ import annotations

import decimal
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any

import pytest
import redis

from captcha_tasks.engine import Job, admit
from captcha_tasks.errors import CaptchaTasksError, InvalidApiKey, SolverError
from captcha_tasks.provider import Answer, Captcha, Polled, Proxy, RecaptchaV2
from captcha_tasks.provider.poll_rules import CLASSIC_RULES, PollRules
from captcha_tasks.settings import Settings
from captcha_tasks.state import Keys, state_redis
from tests.support.provider_settings import with_provider

SITEKEY = "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-"


def ready_on_poll(captcha_id: str, poll: int, first: int) -> Polled:
    """The answer from the poll number ``first`` on (from 1), nothing before it."""
    return Answer(captcha_id, f"token-{captcha_id}") if poll >= first else None


def ready_on_second_poll(captcha_id: str, poll: int) -> Polled:
    return ready_on_poll(captcha_id, poll, 2)


class FakeProvider:
    """A :class:`~captcha_tasks.provider.Provider` in memory. ``outcome(captcha_id,
    poll)`` says what the poll number ``poll`` (from 1) of a captcha finds."""

    def __init__(
        self,
        outcome: Callable[[str, int], Polled] = ready_on_second_poll,
        *,
        batch_reads: bool = True,
        submit_error: CaptchaTasksError | None = None,
        key_refused: bool = False,
        poll_rules: PollRules = CLASSIC_RULES,
    ) -> None:
        self.outcome = outcome
        self.batch_reads = batch_reads
        self.poll_rules = poll_rules
        self.submit_error = submit_error
        self.key_refused = key_refused
        self.submitted: list[tuple[str, Captcha]] = []
        self.requests: list[tuple[str, list[str]]] = []
        self.reports: list[tuple[str, bool]] = []
        self._polls: dict[str, int] = {}
        self._lock = threading.Lock()

    def submit(self, captcha: Captcha, *, proxy: Proxy | None = None) -> str:
        with self._lock:
            self.requests.append(("submit", []))
            if self.submit_error is not None:
                raise self.submit_error
            captcha_id = f"c{len(self.submitted) + 1}"
            self.submitted.append((captcha_id, captcha))
            return captcha_id

    def _next(self, captcha_id: str) -> Polled:
        self._polls[captcha_id] = self._polls.get(captcha_id, 0) + 1
        return self.outcome(captcha_id, self._polls[captcha_id])

    def get(self, captcha_id: str) -> Answer | None:
        with self._lock:
            self.requests.append(("get", [captcha_id]))
            found = self._next(captcha_id)
        if isinstance(found, SolverError):
            raise found
        return found

    def get_many(self, captcha_ids: Iterable[str]) -> dict[str, Polled]:
        ids = list(captcha_ids)
        with self._lock:
            self.requests.append(("get_many", ids))
            return {i: self._next(i) for i in ids}

    def report(self, captcha_id: str, *, correct: bool, captcha_type: str | None = None) -> None:
        self.reports.append((captcha_id, correct))

    def balance(self) -> decimal.Decimal:
        if self.key_refused:
            raise InvalidApiKey("ERROR_KEY_DOES_NOT_EXIST: refused", "ERROR_KEY_DOES_NOT_EXIST")
        return decimal.Decimal("1.5")

    def count(self, kind: str) -> int:
        with self._lock:
            return sum(1 for k, _ in self.requests if k == kind)


class Outcomes:
    """A Completer that records what ended (and fails the test on a second end)."""

    def __init__(self) -> None:
        self.results: dict[str, dict[str, Any]] = {}
        self.errors: dict[str, CaptchaTasksError] = {}
        self.revoked: dict[str, str] = {}
        self._lock = threading.Lock()

    def succeed(self, job: Job, result: dict[str, Any]) -> None:
        with self._lock:
            assert job.task_id not in self.results and job.task_id not in self.errors
            self.results[job.task_id] = result

    def fail(self, job: Job, error: CaptchaTasksError) -> None:
        with self._lock:
            assert job.task_id not in self.results and job.task_id not in self.errors
            self.errors[job.task_id] = error

    def revoke(self, job: Job, reason: str) -> None:
        with self._lock:
            assert job.task_id not in self.results and job.task_id not in self.errors
            assert job.task_id not in self.revoked
            self.revoked[job.task_id] = reason

    def ended(self) -> int:
        with self._lock:
            return len(self.results) + len(self.errors) + len(self.revoked)


@pytest.fixture
def settings(redis_url: str) -> Settings:
    base = Settings.from_env(
        {
            "CAPTCHA_TASKS_REDIS_URL": redis_url,
            "CAPTCHA_TASKS_TIME_SCALE": "0.05",
            "CAPTCHA_TASKS_HTTP_TIMEOUT": "2",
        }
    )
    return with_provider(base, threads=2)


@pytest.fixture
def client(settings: Settings) -> redis.Redis:
    return state_redis(settings)


@pytest.fixture
def keys(settings: Settings) -> Keys:
    return Keys(settings.key_prefix)


@pytest.fixture
def admit_jobs(client: redis.Redis, settings: Settings) -> Callable[..., list[str]]:
    def admit_n(n: int, **options: Any) -> list[str]:
        ids = []
        for i in range(n):
            task_id = str(uuid.uuid4())
            captcha = RecaptchaV2(SITEKEY, f"https://example.com/unit/{i}")
            # By the tests' clock (they pass time.time() to the queue), not Redis's: the
            # two differ by up to half a round trip, enough for a job admitted "now"
            # not to be due yet at the test's "now".
            at = {"now": time.time(), **options}
            assert admit(client, settings, task_id, captcha, **at)
            ids.append(task_id)
        return ids

    return admit_n
