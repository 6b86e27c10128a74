"""One reader per provider: it keeps the captchas it read between reads, and what it keeps
goes to the next reader when it stops, dies or is cut off, never read by two."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Iterable, Iterator

import pytest
import redis

from captcha_tasks.engine import Engine
from captcha_tasks.engine.jobs import Job
from captcha_tasks.engine.queue import SolveQueue
from captcha_tasks.engine.reader import Reader
from captcha_tasks.provider import Polled
from captcha_tasks.settings import Settings
from captcha_tasks.state import Keys
from captcha_tasks_dev.procs import wait_until

from .conftest import FakeProvider, Outcomes, ready_on_poll

LEASE_S = 0.4
MAX_READ_S = 1.0


def _polling_job(queue: SolveQueue, admit_jobs: Callable[..., list[str]]) -> Job:
    """One admitted job, sent (captcha ``c1``) and claimed for its first read."""
    admit_jobs(1)
    now = time.time()
    ((job, _),) = queue.acquire(now, 1)
    assert queue.sending(job, now, "engine@a")
    assert queue.submitted(job, "c1", now, first_poll=now)
    ((polled, _),) = queue.claim(now + 0.01, 1)
    assert polled.state == "polling"
    return polled


def _reading_one(reader: Reader, queue: SolveQueue, admit_jobs: Callable[..., list[str]]) -> Job:
    """One polling job, its reader holding the lease and reading it now."""
    job = _polling_job(queue, admit_jobs)
    assert reader.look(time.time())
    reader.reading([job], time.time())
    return job


@pytest.fixture
def queue(client: redis.Redis, settings: Settings) -> SolveQueue:
    return SolveQueue(client, settings, claim_s=30.0, claimer="engine@a")


def _reader(client: redis.Redis, keys: Keys, queue: SolveQueue, name: str) -> Reader:
    """A reader for ``queue``'s provider; the queue's own (as its engine's) if it has none."""
    reader = Reader(
        client,
        keys,
        provider=queue.provider_name,
        due_key=queue.due_key,
        name=name,
        lease_s=LEASE_S,
        max_read_s=MAX_READ_S,
    )
    if queue.reader is None:
        queue.reader = reader
    return reader


def test_a_kept_captcha_is_read_again_when_due_with_nothing_written_for_its_read(
    client: redis.Redis, keys: Keys, queue: SolveQueue, admit_jobs: Callable[..., list[str]]
) -> None:
    reader = _reader(client, keys, queue, "engine@a")
    job = _reading_one(reader, queue, admit_jobs)
    before = client.hgetall(keys.job(job.task_id)), client.zscore(queue.due_key, job.task_id)
    at = time.time()
    assert queue.reschedule(job, at + 0.2, polled=True, at=at)
    assert (client.hgetall(keys.job(job.task_id)), client.zscore(queue.due_key, job.task_id)) == (
        before
    )
    assert reader.take_due(at + 0.1, 10) == []  # not due yet
    (again,) = reader.take_due(at + 0.3, 10)
    assert (again.task_id, again.polls, again.unsaved_polls) == (job.task_id, 1, 1)
    # Its entry stays ahead while its reader holds it: no claim takes it meanwhile.
    assert queue.claim(at + 0.3, 10) == []


@pytest.mark.parametrize("moved_by", ["ended", "claimed by another engine"])
def test_a_kept_captcha_whose_entry_moved_is_let_go(
    client: redis.Redis,
    keys: Keys,
    queue: SolveQueue,
    admit_jobs: Callable[..., list[str]],
    moved_by: str,
) -> None:
    reader = _reader(client, keys, queue, "engine@a")
    job = _reading_one(reader, queue, admit_jobs)
    at = time.time()
    assert reader.keep(job, at + 0.1)
    if moved_by == "ended":
        client.zrem(queue.due_key, job.task_id)
    else:
        client.zadd(queue.due_key, {job.task_id: at + 30.0})
    score = client.zscore(queue.due_key, job.task_id)
    time.sleep(LEASE_S / 3)
    assert reader.look(time.time())  # its renewal finds the entry moved: let go
    assert reader.take_due(at + 0.2, 10) == []
    assert reader.next_at() == float("inf")
    assert client.zscore(queue.due_key, job.task_id) == score  # left as it was
    assert reader.holding


def test_a_reader_whose_lease_another_took_reads_and_moves_nothing_it_kept(
    client: redis.Redis, keys: Keys, queue: SolveQueue, admit_jobs: Callable[..., list[str]]
) -> None:
    a, b = _reader(client, keys, queue, "engine@a"), _reader(client, keys, queue, "engine@b")
    job = _reading_one(a, queue, admit_jobs)
    assert not b.look(time.time())  # one reader at a time
    at = time.time()
    assert a.keep(job, at + 0.1)
    score = client.zscore(queue.due_key, job.task_id)
    client.delete(keys.reader_of(queue.provider_name))  # a's lease ran out (cut off)
    time.sleep(LEASE_S / 3)  # each looks at the lease every third of it
    assert b.look(time.time())
    assert not a.look(time.time())  # its next renewal: another engine reads
    assert a.take_due(at + 0.2, 10) == []
    assert not a.keep(job, at + 5.0)
    assert client.zscore(queue.due_key, job.task_id) == score


def test_a_dead_readers_captchas_are_claimed_by_the_next_within_a_lease(
    client: redis.Redis,
    keys: Keys,
    settings: Settings,
    queue: SolveQueue,
    admit_jobs: Callable[..., list[str]],
) -> None:
    a, b = _reader(client, keys, queue, "engine@a"), _reader(client, keys, queue, "engine@b")
    job = _reading_one(a, queue, admit_jobs)
    assert a.keep(job, time.time())
    time.sleep(LEASE_S / 3)
    renewed = time.time()
    assert a.look(renewed)  # its entry a lease ahead, then a dies: no renewal, no stop
    assert client.zscore(queue.due_key, job.task_id) == pytest.approx(renewed + LEASE_S)
    deadline = time.monotonic() + 5 * LEASE_S
    while not b.look(time.time()):
        assert time.monotonic() < deadline, "the dead reader's lease never ran out"
        time.sleep(0.02)
    other = SolveQueue(client, settings, claim_s=30.0, claimer="engine@b")
    ((taken, _),) = other.claim(renewed + LEASE_S + 0.01, 10)
    assert (taken.task_id, taken.captcha_id) == (job.task_id, "c1")
    assert int(taken.claim) == int(job.claim) + 1


def test_a_stopping_reader_lets_go_with_its_captchas_due_and_their_reads_counted(
    client: redis.Redis, keys: Keys, queue: SolveQueue, admit_jobs: Callable[..., list[str]]
) -> None:
    a, b = _reader(client, keys, queue, "engine@a"), _reader(client, keys, queue, "engine@b")
    job = _reading_one(a, queue, admit_jobs)
    at = time.time()
    for _ in range(3):
        assert queue.reschedule(job, at + 0.05, polled=True, at=at)
        (job,) = a.take_due(at + 0.05, 10)
    assert queue.reschedule(job, at + 0.05, polled=True, at=at)
    a.stop()
    assert client.zscore(queue.due_key, job.task_id) == pytest.approx(at + 0.05)
    assert client.hget(keys.job(job.task_id), "polls") == "4"
    assert b.look(time.time())  # at once, not after a lease


def test_kept_captchas_taken_for_a_read_that_did_not_start_are_read_next_time(
    client: redis.Redis, keys: Keys, queue: SolveQueue, admit_jobs: Callable[..., list[str]]
) -> None:
    reader = _reader(client, keys, queue, "engine@a")
    job = _reading_one(reader, queue, admit_jobs)
    at = time.time()
    assert reader.keep(job, at)
    (taken,) = reader.take_due(at, 10)
    reader.put_back([taken])  # the turn failed (Redis) before its read started
    assert [j.task_id for j in reader.take_due(at, 10)] == [job.task_id]


def test_a_read_that_never_ends_lets_its_captcha_go_to_the_next_claim(
    client: redis.Redis, keys: Keys, queue: SolveQueue, admit_jobs: Callable[..., list[str]]
) -> None:
    reader = _reader(client, keys, queue, "engine@a")
    job = _polling_job(queue, admit_jobs)
    start = time.time()
    assert reader.look(start)
    reader.reading([job], start)  # and its read never ends
    assert reader.look(start + LEASE_S / 2)
    assert client.zscore(queue.due_key, job.task_id) == pytest.approx(start + 1.5 * LEASE_S)
    assert reader.look(start + MAX_READ_S + LEASE_S / 2)  # the read is too old: let go
    assert client.zscore(queue.due_key, job.task_id) == pytest.approx(start + 1.5 * LEASE_S)
    assert not reader.keep(job, start + 5.0)
    ((claimed, _),) = queue.claim(start + 1.5 * LEASE_S + 0.01, 10)
    assert claimed.task_id == job.task_id


class _Reads:
    """Two engines' providers over one fake provider: which engine asked for what."""

    def __init__(self, outcome: Callable[[str, int], Polled]) -> None:
        self.shared = FakeProvider(outcome)
        self.by_engine: dict[str, int] = {}
        self._lock = threading.Lock()

    def of(self, engine: str) -> FakeProvider:
        reads = self

        class Counted(FakeProvider):
            def get_many(self, captcha_ids: Iterable[str]) -> dict[str, Polled]:
                ids = list(captcha_ids)
                with reads._lock:
                    reads.by_engine[engine] = reads.by_engine.get(engine, 0) + len(ids)
                return reads.shared.get_many(ids)

            def submit(self, captcha, *, proxy=None):  # type: ignore[no-untyped-def]
                return reads.shared.submit(captcha, proxy=proxy)

        return Counted(self.shared.outcome)


@pytest.fixture
def two_engines(client: redis.Redis, settings: Settings) -> Iterator[Callable[..., list]]:
    engines: list[Engine] = []

    def make(
        reads: _Reads, modes: tuple[str, str] = ("one", "one")
    ) -> list[tuple[Engine, Outcomes]]:
        out = []
        for name, mode in zip(("engine@a", "engine@b"), modes, strict=True):
            outcomes = Outcomes()
            engine = Engine(
                dataclasses.replace(settings, readers=mode),
                client,
                reads.of(name),
                outcomes,
                live_workers=lambda: ["a", "b"],
                name=name,
            )
            engines.append(engine.start())
            out.append((engine, outcomes))
        return out

    yield make
    for engine in engines:
        engine.stop(timeout=10)


def test_of_two_engines_one_reads_every_captcha_and_a_stop_hands_them_on(
    two_engines: Callable[..., list[tuple[Engine, Outcomes]]],
    admit_jobs: Callable[..., list[str]],
) -> None:
    reads = _Reads(lambda captcha_id, poll: ready_on_poll(captcha_id, poll, 4))
    (a, a_out), (b, b_out) = two_engines(reads)
    ids = admit_jobs(4)
    wait_until(lambda: a_out.ended() + b_out.ended() == 4, timeout=30, what="4 solves")
    assert len(reads.by_engine) == 1, reads.by_engine  # every read by one engine
    reader = a if "engine@a" in reads.by_engine else b
    other = b if reader is a else a
    # The reader stops with captchas kept: the other engine reads them on.
    more = admit_jobs(4)
    wait_until(lambda: reader.reader.next_at() < float("inf"), timeout=20, what="a kept one")
    reader.stop(timeout=10)
    outcomes = (a_out, b_out)
    wait_until(lambda: sum(o.ended() for o in outcomes) == 8, timeout=30, what="8 solves")
    results = {**a_out.results, **b_out.results}
    assert set(results) == set(ids + more)
    assert all(r["polls"] == 4 for r in results.values()), results
    assert other.reader.holding


def test_engines_reading_all_and_one_together_solve_every_captcha_once(
    two_engines: Callable[..., list[tuple[Engine, Outcomes]]],
    admit_jobs: Callable[..., list[str]],
) -> None:
    # A rolling deploy from CAPTCHA_TASKS_READERS=all to one runs both for a while.
    reads = _Reads(lambda captcha_id, poll: ready_on_poll(captcha_id, poll, 4))
    (every, every_out), (one, one_out) = two_engines(reads, modes=("all", "one"))
    ids = admit_jobs(12)
    outcomes = (every_out, one_out)
    wait_until(lambda: sum(o.ended() for o in outcomes) == 12, timeout=30, what="12 solves")
    assert not set(every_out.results) & set(one_out.results)  # none ended twice
    results = {**every_out.results, **one_out.results}
    assert set(results) == set(ids), {**every_out.errors, **one_out.errors}
    assert reads.shared.count("submit") == 12
    assert all(r["submits"] == 1 and r["polls"] == 4 for r in results.values()), results
    assert one.reader is not None and one.reader.holding and every.reader is None


def test_a_redis_error_between_taking_kept_captchas_and_reading_them_loses_none(
    two_engines: Callable[..., list[tuple[Engine, Outcomes]]],
    admit_jobs: Callable[..., list[str]],
) -> None:
    reads = _Reads(lambda captcha_id, poll: ready_on_poll(captcha_id, poll, 3))
    engines = two_engines(reads)
    failed = threading.Event()
    for engine, _ in engines:
        claim = engine.queue.claim

        def failing(now: float, n: int, engine: Engine = engine, claim=claim):  # type: ignore[no-untyped-def]
            # Once, right after the reader took every kept captcha for a read (the
            # window a Redis restart hit in the fault suite).
            took_all = engine.reader.next_at() == float("inf") and engine.reader._reading
            if took_all and not failed.is_set():
                failed.set()
                raise redis.ConnectionError("Redis restarting")
            return claim(now, n)

        engine.queue.claim = failing  # type: ignore[method-assign]
    ids = admit_jobs(3)
    ended = lambda: sum(outcomes.ended() for _, outcomes in engines)  # noqa: E731
    wait_until(lambda: ended() == 3, timeout=30, what="3 solves")
    assert failed.is_set()
    results = {k: v for _, o in engines for k, v in o.results.items()}
    assert set(results) == set(ids)


def test_a_reader_with_no_free_call_thread_lets_another_engine_read(
    client: redis.Redis, settings: Settings, admit_jobs: Callable[..., list[str]]
) -> None:
    release = threading.Event()
    reads = _Reads(lambda captcha_id, poll: ready_on_poll(captcha_id, poll, 2))
    stuck_provider = reads.of("engine@a")
    read_of_a = stuck_provider.get_many

    def held_read(captcha_ids: Iterable[str]) -> dict[str, Polled]:
        release.wait(20)  # its one call thread is held: it can read nothing else
        return read_of_a(captcha_ids)

    stuck_provider.get_many = held_read  # type: ignore[method-assign]
    one = dataclasses.replace(settings, readers="one")
    started: list[tuple[Engine, Outcomes]] = []
    try:
        for name, provider, threads in (
            ("engine@a", stuck_provider, 1),
            ("engine@b", reads.of("engine@b"), 4),
        ):
            outcomes = Outcomes()
            engine = Engine(
                dataclasses.replace(one, engine_threads=threads),
                client,
                provider,
                outcomes,
                live_workers=lambda: ["a", "b"],
                name=name,
            )
            started.append((engine.start(), outcomes))
            if name == "engine@a":
                reader = engine.reader
                assert reader is not None
                wait_until(lambda r=reader: r.holding, timeout=5, what="engine@a reads")
        ids = admit_jobs(3)
        ended = lambda: sum(o.ended() for _, o in started)  # noqa: E731
        # a's read never comes back; after a lease without a free thread, b reads them all.
        wait_until(lambda: ended() == 3, timeout=20, what="3 solves read by engine@b")
        results = {k: v for _, o in started for k, v in o.results.items()}
        assert set(results) == set(ids)
        assert reads.by_engine.get("engine@b", 0) >= 3
    finally:
        release.set()
        for engine, _ in started:
            engine.stop(timeout=10)


def test_a_redis_without_zmscore_reads_with_every_engine(
    client: redis.Redis,
    settings: Settings,
    admit_jobs: Callable[..., list[str]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A Redis older than 6.2 answers ZMSCORE, as any command it lacks, with an error.
    class Redis5(redis.Redis):
        def execute_command(self, *args, **options):  # type: ignore[no-untyped-def]
            if str(args[0]).upper() == "ZMSCORE":
                raise redis.ResponseError(
                    "ERR unknown command 'ZMSCORE', with args beginning with:"
                )
            return super().execute_command(*args, **options)

    old = Redis5(connection_pool=client.connection_pool)
    outcomes = Outcomes()
    engine = Engine(
        dataclasses.replace(settings, readers="one"),
        old,
        FakeProvider(lambda captcha_id, poll: ready_on_poll(captcha_id, poll, 2)),
        outcomes,
        live_workers=lambda: ["a"],
        name="engine@old",
    )
    assert engine.reader is not None  # asked for
    engine.start()
    try:
        ids = admit_jobs(3)
        wait_until(lambda: outcomes.ended() == 3, timeout=20, what="3 solves")
    finally:
        engine.stop(timeout=10)
    assert engine.reader is None  # every engine reads, as with all
    assert set(outcomes.results) == set(ids), outcomes.errors
    assert "lacks ZMSCORE" in caplog.text
