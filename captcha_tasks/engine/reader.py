"""One engine of a cluster reads a provider's captchas at a time: its reader
(``CAPTCHA_TASKS_READERS=one``, the default; with ``all`` every engine claims and reads).

Every engine submits; only the one holding the provider's reader lease claims captchas
from the poll schedule and reads them, so one request at a tick of the poll grid asks
for every captcha due then, whichever engine sent it. A captcha it read without an
answer stays with it: the job and the time of its next read are kept in memory, and
Redis is not told of that read. Redis sees a captcha claimed once by a reader, then
nothing until it ends.

The reader renews its lease every third of it (``reader_hold.lua``), and in the same
call checks the schedule entries of every captcha it holds and moves them a lease
ahead: while it lives no claim takes them; once it stops renewing (it died or was cut
off from Redis), the next reader claims each of them within a lease, as after any
engine's crash. An entry that is gone or moved without its reader (the captcha ended,
was resubmitted or revoked, another engine claimed it) is let go at that check: such
a captcha may be read once more before it, and that read changes nothing (its end,
reschedule and requeue are fenced by its state, its captcha id and its claim). So is
a captcha taken to read longer than a claim ago whose read never ended. An engine that
stops lets go of the lease with its captchas due at their own times and
their reads counted in their jobs.

What a reader that dies loses: the reads it kept unsaved (the result's ``polls`` and a
provider's read cap count from the last saved count), and its captchas' next reads
until the lease runs out.
"""

from __future__ import annotations

import dataclasses
import secrets
import threading
from collections.abc import Iterable, Sequence

import redis

from ..state.keys import Keys
from ..state.scripts import run
from .jobs import Job

__all__ = ["Reader", "supported"]


def supported(client: redis.Redis, due_key: str) -> bool:
    """Whether this Redis runs a reader's scripts: they use ``ZMSCORE`` (Redis 6.2). A
    Redis that cannot be asked now counts as one that can: its scripts then fail as any
    call does, and are retried."""
    try:
        client.zmscore(due_key, ["probe"])
    except redis.ResponseError as exc:
        return "unknown command" not in str(exc).lower()
    except redis.RedisError:
        return True
    return True


@dataclasses.dataclass(frozen=True, slots=True)
class _Kept:
    job: Job
    #: When to read it next.
    next_at: float


class Reader:
    """This engine's part in reading one provider's captchas: the lease, and the
    captchas it holds (being read, or kept between reads). Thread-safe."""

    def __init__(
        self,
        client: redis.Redis,
        keys: Keys,
        *,
        provider: str,
        due_key: str,
        name: str,
        lease_s: float,
        max_read_s: float,
    ) -> None:
        self.redis = client
        self.key = keys.reader_of(provider)
        self.job_prefix = keys.job_prefix
        self.due_key = due_key
        self.token = f"{name}:{secrets.token_hex(4)}"
        self.lease_s = lease_s
        #: Longest a read may take (its engine's claim): a captcha taken to read longer
        #: ago is let go at the next renewal, and the next claim takes it.
        self.max_read_s = max_read_s
        self._lock = threading.Lock()
        #: Kept between reads, and being read (each with its schedule entry's score).
        self._kept: dict[str, _Kept] = {}
        self._reading: dict[str, tuple[Job, float]] = {}
        #: Whether this engine held the lease when it last asked.
        self.holding = False
        self._renewed_at = float("-inf")

    # -- the lease ---------------------------------------------------------------------

    def look(self, now: float) -> bool:
        """Take the lease if it is free, renew it if it is ours (every third of it: the
        captchas held checked and moved a lease ahead); True if this engine reads."""
        if now - self._renewed_at < self.lease_s / 3:
            return self.holding
        with self._lock:
            for task_id, (_, since) in list(self._reading.items()):
                if now - since > self.max_read_s:  # a read that never ended: let go
                    del self._reading[task_id]
            held = [kept.job for kept in self._kept.values()]
            held += [job for job, _ in self._reading.values()]
        score = now + self.lease_s
        args: list[object] = [self.token, self._lease_ms, repr(score)]
        for job in held:
            args += [job.task_id, repr(job.entry_score)]
        flags = run(self.redis, "reader_hold", [self.key, self.due_key], args)
        self._renewed_at = now
        if flags is None:
            self._lost()
            return False
        self.holding = True
        with self._lock:  # each held captcha, wherever it is now: rescored, or let go
            for job, flag in zip(held, flags, strict=True):
                task_id = job.task_id
                if task_id in self._kept:
                    kept = self._kept.pop(task_id)
                    if flag:
                        self._kept[task_id] = _Kept(_scored(kept.job, score), kept.next_at)
                elif task_id in self._reading:
                    reading, since = self._reading.pop(task_id)
                    if flag:
                        self._reading[task_id] = (_scored(reading, score), since)
        return True

    @property
    def _lease_ms(self) -> int:
        return max(1, int(self.lease_s * 1000))

    # -- the captchas held -------------------------------------------------------------

    def reading(self, jobs: Iterable[Job], now: float) -> None:
        """Claimed captchas this reader reads from ``now`` (their entries' scores on
        them)."""
        with self._lock:
            for job in jobs:
                self._reading[job.task_id] = (job, now)

    def take_due(self, now: float, n: int) -> list[Job]:
        """Up to ``n`` kept captchas due by ``now``, soonest first, now being read (none
        once a lease has passed since the last renewal: the lease may be another's)."""
        if now - self._renewed_at >= self.lease_s:
            return []
        with self._lock:
            due = sorted(
                (kept for kept in self._kept.values() if kept.next_at <= now),
                key=lambda kept: kept.next_at,
            )[:n]
            for kept in due:
                del self._kept[kept.job.task_id]
                self._reading[kept.job.task_id] = (kept.job, now)
        return [kept.job for kept in due]

    def put_back(self, jobs: Iterable[Job]) -> None:
        """Kept captchas taken to read that were not read after all: due at once."""
        with self._lock:
            for job in jobs:
                taken = self._reading.pop(job.task_id, None)
                if taken is not None:
                    self._kept[job.task_id] = _Kept(taken[0], 0.0)

    def keep(self, job: Job, next_at: float) -> bool:
        """Keep a captcha just read, to read again at ``next_at``; False if this engine
        does not hold it (it no longer reads, or the captcha moved on meanwhile)."""
        with self._lock:
            taken = self._reading.pop(job.task_id, None)
            if taken is None or not self.holding:
                return False
            self._kept[job.task_id] = _Kept(_scored(job, taken[0].entry_score), next_at)
            return True

    def forget(self, task_ids: Iterable[str]) -> None:
        """Captchas this engine ended or requeued (a revoke, a pushed answer): not read
        again."""
        with self._lock:
            for task_id in task_ids:
                self._kept.pop(task_id, None)
                self._reading.pop(task_id, None)

    def read_ended(self, task_ids: Iterable[str]) -> None:
        """Reads ended: what was not kept has ended or moved on."""
        with self._lock:
            for task_id in task_ids:
                self._reading.pop(task_id, None)

    def next_at(self) -> float:
        """When the soonest kept captcha is due (inf if none)."""
        with self._lock:
            return min((kept.next_at for kept in self._kept.values()), default=float("inf"))

    def give_back(self, jobs: Sequence[Job], now: float) -> None:
        """Captchas taken to read that this engine cannot read now: due at once, for the
        next claim."""
        self.read_ended(job.task_id for job in jobs)
        self._move([(job, now) for job in jobs], release=False)

    def step_aside(self, now: float) -> None:
        """Let go of the lease (as :meth:`stop`) and take it again no sooner than a lease
        from ``now``: another engine reads meanwhile, if there is one."""
        self.stop()
        self._renewed_at = now + self.lease_s

    def stop(self) -> None:
        """Let go of the lease: every captcha held due at its own time for the next
        reader, and the reads it kept unsaved counted in its job."""
        with self._lock:
            held = [(kept.job, kept.next_at) for kept in self._kept.values()]
            held += [(job, 0.0) for job, _ in self._reading.values()]
            self._kept, self._reading = {}, {}
        if self.holding:
            self._move(held, release=True)
        self.holding = False

    def _move(self, moves: Sequence[tuple[Job, float]], *, release: bool) -> None:
        args: list[object] = [self.token, "1" if release else "0", self.job_prefix]
        for job, at in moves:
            args += [repr(at), job.task_id, job.unsaved_polls, repr(job.entry_score)]
        if not run(self.redis, "reader_move", [self.key, self.due_key], args):
            self._lost()

    def _lost(self) -> None:
        """Another engine reads: nothing held here is read again by this one."""
        with self._lock:
            self.holding = False
            self._kept.clear()
            self._reading.clear()


def _scored(job: Job, score: float | None) -> Job:
    return job if job.entry_score == score else dataclasses.replace(job, entry_score=score)
