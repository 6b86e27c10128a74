"""The engine's loop with a fake provider: submit -> poll -> an answer, and failures."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator

import pytest
import redis

from captcha_tasks.engine import Engine, admit
from captcha_tasks.errors import BadRequest, CaptchaUnsolvable, InvalidApiKey
from captcha_tasks.provider import FunCaptcha, GeeTest, Polled, Turnstile
from captcha_tasks.settings import Settings
from captcha_tasks.state import Keys
from captcha_tasks_dev.procs import wait_until
from tests.support.provider_settings import with_provider

from .conftest import FakeProvider, Outcomes, ready_on_poll

MakeEngine = Callable[..., tuple[Engine, Outcomes]]


@pytest.fixture
def make_engine(client: redis.Redis, settings: Settings) -> Iterator[MakeEngine]:
    engines: list[Engine] = []

    def make(
        provider: FakeProvider,
        *,
        workers: tuple[str, ...] = ("w",),
        threads: int | None = None,
        clock: Callable[[], float] | None = None,
    ) -> tuple[Engine, Outcomes]:
        outcomes = Outcomes()
        engine = Engine(
            settings if threads is None else with_provider(settings, threads=threads),
            client,
            provider,
            outcomes,
            live_workers=lambda: list(workers),
            name="unit",
            clock=clock,
        )
        engines.append(engine.start())
        return engine, outcomes

    yield make
    for engine in engines:
        engine.stop(timeout=10)


def test_a_job_is_submitted_polled_and_solved(
    make_engine: MakeEngine, admit_jobs: Callable[..., list[str]], client: redis.Redis, keys: Keys
) -> None:
    provider = FakeProvider()
    engine, outcomes = make_engine(provider)
    ids = admit_jobs(3)
    wait_until(lambda: outcomes.ended() == 3, timeout=20, what="3 solves")
    assert set(outcomes.results) == set(ids), outcomes.errors
    solutions = {r["captcha_id"]: r["solution"] for r in outcomes.results.values()}
    assert solutions == {c: f"token-{c}" for c, _ in provider.submitted}
    assert all(r["submits"] == 1 and r["polls"] == 2 for r in outcomes.results.values())
    assert provider.count("submit") == 3
    counts = engine.stats.snapshot()
    assert (counts["submitted"], counts["solved"], counts["polls_of_solved"]) == (3, 3, 6)
    assert client.zcard(keys.budget) == 0
    wait_until(lambda: client.zcard(keys.due) == 0, timeout=5, what="the schedule emptied")


def test_without_batch_reads_every_poll_is_one_captcha(
    make_engine: MakeEngine, admit_jobs: Callable[..., list[str]]
) -> None:
    provider = FakeProvider(batch_reads=False)
    engine, outcomes = make_engine(provider)
    admit_jobs(3)
    wait_until(lambda: outcomes.ended() == 3, timeout=30, what="3 solves")
    assert len(outcomes.results) == 3
    assert provider.count("get_many") == 0
    assert provider.count("get") == engine.stats.snapshot()["poll_requests"] >= 6


class HeldClock:
    """Time standing still at its start until :meth:`release`, then running on."""

    def __init__(self) -> None:
        self.start = time.time() + 0.5  # past every admission's "now"
        self._released: float | None = None
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            if self._released is None:
                return self.start
            return self.start + time.monotonic() - self._released

    def release(self) -> None:
        with self._lock:
            self._released = time.monotonic()


def _wait_all_polling(client: redis.Redis, keys: Keys, task_ids: list[str]) -> None:
    """Until every one of ``task_ids`` is submitted (its clock held: they share ticks)."""
    wait_until(
        lambda: all(client.hget(keys.job(t), "state") == "polling" for t in task_ids),
        timeout=20,
        what=f"{len(task_ids)} submits",
    )


def test_a_funcaptcha_and_a_challenge_turnstile_are_read_on_their_own_never_in_a_batch(
    make_engine: MakeEngine,
    admit_jobs: Callable[..., list[str]],
    client: redis.Redis,
    settings: Settings,
    keys: Keys,
) -> None:
    # res.php joins a batch's answers with "|", which a FunCaptcha token contains. The
    # three reCAPTCHAs must meet in a batch read for the test to show anything: the
    # engine's clock stands still until all five are submitted, so they share one
    # submit time and, answered on their fourth poll, the same ticks after it.
    provider = FakeProvider(lambda captcha_id, poll: ready_on_poll(captcha_id, poll, 4))
    task_ids = admit_jobs(3)
    arkose = FunCaptcha("69A21A01-CC7B-B9C6-0F9A-E7FA06677FFC", "https://example.com/fc")
    task_ids.append(str(uuid.uuid4()))
    assert admit(client, settings, task_ids[-1], arkose)
    # Its token is bound to the userAgent that only a single read carries.
    challenge = Turnstile(
        "0x4AAAAAAABkMYinukE8nzY",
        "https://example.com/cf",
        action="managed",
        cdata="7d2a",
        pagedata="3gAF",
    )
    task_ids.append(str(uuid.uuid4()))
    assert admit(client, settings, task_ids[-1], challenge)
    clock = HeldClock()
    _, outcomes = make_engine(provider, threads=5, clock=clock)
    _wait_all_polling(client, keys, task_ids)
    assert provider.count("get") == provider.count("get_many") == 0
    clock.release()
    wait_until(lambda: outcomes.ended() == 5, timeout=30, what="5 solves")
    assert len(outcomes.results) == 5, outcomes.errors
    lonely = {c for c, captcha in provider.submitted if captcha.type != "recaptcha_v2"}
    recaptchas = sorted(c for c, captcha in provider.submitted if captcha.type == "recaptcha_v2")
    assert len(lonely) == 2 and len(recaptchas) == 3
    batches = [ids for kind, ids in provider.requests if kind == "get_many"]
    singles = [ids for kind, ids in provider.requests if kind == "get"]
    assert len(batches) == 4 and all(sorted(ids) == recaptchas for ids in batches)
    assert all(singles.count([captcha_id]) == 4 for captcha_id in lonely)


def test_geetest_v3_captchas_are_read_one_by_one(
    make_engine: MakeEngine, client: redis.Redis, settings: Settings, keys: Keys
) -> None:
    # A GeeTest v3 answer's seccode is "<validate>|jordan": res.php's batch answer,
    # joined with "|", could not be split. Three submitted at one time share their ticks.
    provider = FakeProvider(lambda captcha_id, poll: ready_on_poll(captcha_id, poll, 3))
    task_ids = [str(uuid.uuid4()) for _ in range(3)]
    for i, task_id in enumerate(task_ids):
        captcha = GeeTest(
            "f1ab2cdefa3456789012345678901234",
            "12345678abc90123d45678ef90123a456b",
            f"https://example.com/gt/{i}",
        )
        assert admit(client, settings, task_id, captcha)
    clock = HeldClock()
    _, outcomes = make_engine(provider, threads=3, clock=clock)
    _wait_all_polling(client, keys, task_ids)
    clock.release()
    wait_until(lambda: outcomes.ended() == 3, timeout=30, what="3 ends")
    assert len(outcomes.results) == 3, outcomes.errors
    assert provider.count("get_many") == 0
    assert provider.count("get") == 9  # each read alone, answered on its third


def test_an_unsolvable_captcha_is_resubmitted_once_then_fails(
    make_engine: MakeEngine, admit_jobs: Callable[..., list[str]]
) -> None:
    def never(captcha_id: str, poll: int) -> Polled:
        return CaptchaUnsolvable("workers gave up", "ERROR_CAPTCHA_UNSOLVABLE")

    provider = FakeProvider(never)
    engine, outcomes = make_engine(provider)
    (task_id,) = admit_jobs(1)
    wait_until(lambda: outcomes.ended() == 1, timeout=20, what="the failure")
    error = outcomes.errors[task_id]
    assert isinstance(error, CaptchaUnsolvable) and error.code == "ERROR_CAPTCHA_UNSOLVABLE"
    assert provider.count("submit") == 2
    assert engine.stats.snapshot()["resubmits_unsolvable"] == 1


def test_a_refused_submit_fails_its_job_without_polling(
    make_engine: MakeEngine, admit_jobs: Callable[..., list[str]]
) -> None:
    provider = FakeProvider(submit_error=BadRequest("ERROR_PAGEURL: bad", "ERROR_PAGEURL"))
    _, outcomes = make_engine(provider)
    (task_id,) = admit_jobs(1)
    wait_until(lambda: outcomes.ended() == 1, timeout=20, what="the failure")
    assert outcomes.errors[task_id].code == "ERROR_PAGEURL"
    assert provider.count("get") == provider.count("get_many") == 0


def test_a_refused_key_with_no_other_worker_fails_the_job_and_pauses(
    make_engine: MakeEngine, admit_jobs: Callable[..., list[str]]
) -> None:
    refused = InvalidApiKey("ERROR_KEY_DOES_NOT_EXIST: refused", "ERROR_KEY_DOES_NOT_EXIST")
    provider = FakeProvider(submit_error=refused, key_refused=True)
    engine, outcomes = make_engine(provider)
    (task_id,) = admit_jobs(1)
    wait_until(lambda: outcomes.ended() == 1, timeout=20, what="the failure")
    assert isinstance(outcomes.errors[task_id], InvalidApiKey)
    assert engine.refusal.paused
    assert provider.count("submit") == 1


def test_an_engine_polls_what_its_own_calls_scheduled_without_looking_at_redis(
    make_engine: MakeEngine,
    admit_jobs: Callable[..., list[str]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Looks at Redis only once (its first idle turn): every poll after that comes from
    # what its own submits and reschedules noted, one by one, on time.
    monkeypatch.setattr("captcha_tasks.engine.loop.LOOK_EVERY", 3600.0)
    provider = FakeProvider(batch_reads=False)
    # The jobs are admitted by the test's clock: the engine keeps the same one. By
    # Redis's (the default) it may trail the admissions by a millisecond or so, and a
    # wake-up would then find the jobs not yet due; an engine looks again LOOK_EVERY
    # later, which this test sets out of reach.
    _, outcomes = make_engine(provider, clock=time.time)
    admit_jobs(3)
    wait_until(lambda: outcomes.ended() == 3, timeout=20, what="3 solves")
    assert len(outcomes.results) == 3, outcomes.errors
    assert provider.count("get") == 6  # each captcha read twice: none was lost or repeated


class HeldFirstRead:
    """A fake provider's answers: none ever ready, the first read held until
    :attr:`answer_read` is set; :attr:`reads` counts every read."""

    def __init__(self) -> None:
        self.reading, self.answer_read = threading.Event(), threading.Event()
        self.reads = 0

    def __call__(self, captcha_id: str, poll: int) -> Polled:
        self.reads += 1
        if poll == 1:
            self.reading.set()
            self.answer_read.wait(10)
        return None


def test_a_solve_revoked_while_it_is_read_ends_once_the_read_has(
    make_engine: MakeEngine, admit_jobs: Callable[..., list[str]]
) -> None:
    held = HeldFirstRead()
    provider = FakeProvider(held, batch_reads=False)
    engine, outcomes = make_engine(provider)
    [task_id] = admit_jobs(1)
    wait_until(held.reading.is_set, timeout=10, what="its first read under way")
    engine.revoke([task_id])
    time.sleep(1.5)  # the engine takes several turns meanwhile
    assert outcomes.ended() == 0  # not told revoked while a read of it is on its way
    held.answer_read.set()
    wait_until(lambda: task_id in outcomes.revoked, timeout=5, what="it revoked")
    time.sleep(1.0)
    assert provider.count("get") == 1  # and read no more
    assert engine.revoking() == 0


def test_a_revoke_held_back_by_a_read_is_settled_before_the_next_read(
    make_engine: MakeEngine, admit_jobs: Callable[..., list[str]]
) -> None:
    # Batched: read again at every tick of the grid, far sooner than a revoke's
    # next look (REVOKE_EVERY) would come.
    held = HeldFirstRead()
    engine, outcomes = make_engine(FakeProvider(held, batch_reads=True))
    [task_id] = admit_jobs(1)
    wait_until(held.reading.is_set, timeout=10, what="its first read under way")
    engine.revoke([task_id])
    held.answer_read.set()
    wait_until(lambda: task_id in outcomes.revoked, timeout=5, what="it revoked")
    time.sleep(0.5)
    assert held.reads == 1
