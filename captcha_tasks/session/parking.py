"""Tasks that wait for a host's session lock without running: parked, then re-sent.

A task that finds the lock held does not retry on a timer (a task execution every
couple of seconds per waiter): it parks, i.e. stores the message that re-sends it
(same task id, so ``AsyncResult.get()`` still works) in the host's parked set, and
ends without a result (Celery's ``Ignore``). Whoever frees the lock gets the parked
messages in the same atomic step (:func:`release_collect`), re-sends them and only
then removes them (:func:`forget`): a crash in between re-sends a page twice rather
than losing it. A holder that crashes never releases; for it, the first waiter to park
schedules the host's sweeper (one at a time, named by its due time), which at the
lock's expiry re-sends everyone (:func:`sweep`), and at a waiter's deadline re-sends
that waiter, which then fails with ``SessionLockTimeout`` as a retrying waiter does.

This module knows Redis and JSON only; re-sending is the worker's business
(:mod:`captcha_tasks.worker.session_bases`).
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from typing import Any

import redis

from ..settings import Settings
from ..state import Keys, state_redis
from ..state.clock import clock_of
from ..state.scripts import run
from .cookie_model import normalize_host

__all__ = ["Parked", "Released", "Sweep", "forget", "park", "release_collect", "sweep"]

#: Slack after a lock's expiry (or a deadline) before the sweeper looks, in seconds:
#: covers clocks and queues a little late.
SWEEP_MARGIN = 0.5


@dataclasses.dataclass(frozen=True)
class Parked:
    """The outcome of :func:`park`: ``parked`` False means the lock was free (go on).
    ``sweep_in`` > 0: schedule the host's sweeper in that many seconds, as ``sweep_due``."""

    parked: bool
    sweep_in: float = 0.0
    sweep_due: int = 0


@dataclasses.dataclass(frozen=True)
class Released:
    """The outcome of :func:`release_collect`: whether this owner's lock was deleted,
    and the parked members to re-send (then :func:`forget`)."""

    released: bool
    parked: list[str]


@dataclasses.dataclass(frozen=True)
class Sweep:
    """The outcome of :func:`sweep`: members to re-send (then :func:`forget`), and
    ``again_in`` > 0: this sweeper is needed again in that many seconds, as ``due``."""

    parked: list[str]
    again_in: float = 0.0
    due: int = 0


def _keys(settings: Settings, host: str) -> list[str]:
    keys = Keys(settings.key_prefix)
    host = normalize_host(host)
    return [keys.session_lock(host), keys.session_parked(host)]


def _margin_ms(settings: Settings) -> int:
    return int(1000 * min(SWEEP_MARGIN, settings.lock_ttl / 2))


def entry(message: dict[str, Any], deadline: float) -> str:
    """The parked member of a task: its re-send ``message`` (JSON-able) and its wait
    deadline (epoch seconds), with a random part so each park is its own member (a
    task re-sent and parked again before its old member is forgotten stays parked)."""
    return json.dumps(
        {"message": message, "deadline": deadline, "park": uuid.uuid4().hex},
        separators=(",", ":"),
    )


def read_entry(member: str) -> tuple[dict[str, Any], float]:
    """``(message, deadline)`` of a parked member."""
    data = json.loads(member)
    return dict(data["message"]), float(data["deadline"])


def park(
    client: redis.Redis, settings: Settings, host: str, member: str, deadline: float
) -> Parked:
    """Park ``member`` (see :func:`entry`) on ``host``'s lock if it is still held."""
    out = run(
        client,
        "lock_park",
        _keys(settings, host),
        [member, int(deadline * 1000), _margin_ms(settings)],
    )
    if not int(out[0]):
        return Parked(False)
    return Parked(True, int(out[1]) / 1000, int(out[2]))


def release_collect(client: redis.Redis, settings: Settings, host: str, token: str) -> Released:
    """Delete ``host``'s lock if ``token`` owns it, and hand back the parked members
    (also when the lock had expired and is free; none when another owner holds it)."""
    out = run(client, "lock_release", _keys(settings, host), [token])
    return Released(bool(int(out[0])), [str(m) for m in out[1:]])


def sweep(client: redis.Redis, settings: Settings, host: str, due: int) -> Sweep:
    """The sweeper's look at ``host``: members to re-send now, and whether to come back."""
    out = run(client, "lock_sweep", _keys(settings, host), [_margin_ms(settings), due])
    return Sweep([str(m) for m in out[2:]], int(out[0]) / 1000, int(out[1]))


def forget(client: redis.Redis, settings: Settings, host: str, member: str) -> None:
    """Remove a parked member once its task has been re-sent."""
    client.zrem(_keys(settings, host)[1], member)


def deadline_after(settings: Settings, ttls: float) -> float:
    """An epoch deadline ``ttls`` lock TTLs from now, by Redis's clock (``lock_park.lua``
    compares it with ``TIME``; another worker may re-send the parked task)."""
    return now(settings) + ttls * settings.lock_ttl


def now(settings: Settings) -> float:
    """Redis's time: what lock deadlines are measured by."""
    return clock_of(state_redis(settings))()
