"""Jobs whose results are still to be published, kept in Redis so no bridge owns them.

A bridge records each job here *before* it enqueues the solve (and, with JetStream,
before it acknowledges the message), and takes it off when it publishes the result.
So a bridge that dies forgets nothing: the next one of the same queue group (or the
same one restarted) finds the jobs in flight and publishes their results. Several
bridges of a group poll the same hash; :meth:`PendingResults.claim` hands each
result to one of them only.

Keys (under ``CAPTCHA_TASKS_KEY_PREFIX``, ``ct:`` by default)::

    ct:bridge:<group>:pending        hash  Celery task id -> entry JSON   (TTL refreshed)
    ct:bridge:<group>:published:<id> flag  this job's result was published (TTL)
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
from typing import Any, cast

import redis

from ..state.keys import Keys
from ..state.scripts import run

__all__ = ["Entry", "PendingResults"]


@dataclasses.dataclass(frozen=True)
class Entry:
    """What publishing a job's result needs: the job's ``task_id``, the results
    ``subject`` and the epoch ``deadline`` after which it fails with ``TIMEOUT``."""

    task_id: str | int
    subject: str
    deadline: float

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, raw: str) -> Entry:
        data = json.loads(raw)
        return cls(data["task_id"], str(data["subject"]), float(data["deadline"]))


class PendingResults:
    """The pending hash of queue group ``group``; ``ttl`` bounds how long an entry or a
    published marker outlives the last job recorded (it must exceed the result deadline)."""

    def __init__(self, client: redis.Redis, prefix: str, group: str, ttl: float) -> None:
        self.client = client
        keys = Keys(prefix)
        self.key = keys.bridge_pending(group)
        self.published_prefix = keys.bridge_published_prefix(group)
        self.ttl = max(1, int(ttl))

    def track(self, celery_task_id: str, entry: Entry) -> bool:
        """Record a job; False if its result was published already (a redelivered job)."""
        keys = [self.key, self.published_prefix + celery_task_id]
        return bool(
            run(self.client, "bridge_track", keys, [celery_task_id, entry.to_json(), self.ttl])
        )

    def entries(self) -> dict[str, Entry]:
        """Every pending job (unreadable entries are skipped: they expire with the hash)."""
        raw = cast(Mapping[Any, Any], self.client.hgetall(self.key))
        found: dict[str, Entry] = {}
        for key, value in raw.items():
            try:
                found[_text(key)] = Entry.from_json(_text(value))
            except (ValueError, KeyError, TypeError):
                continue
        return found

    def claim(self, celery_task_ids: Iterable[str]) -> set[str]:
        """Take these jobs off the hash; returns those this caller took (each id is
        taken once, across every bridge), now marked published."""
        ids = list(celery_task_ids)
        if not ids:
            return set()
        taken = run(
            self.client, "bridge_claim", [self.key], [self.published_prefix, self.ttl, *ids]
        )
        return {_text(item) for item in taken}

    def release(self, celery_task_id: str, entry: Entry) -> None:
        """Put a claimed job back: its result could not be published this time."""
        keys = [self.key, self.published_prefix + celery_task_id]
        run(self.client, "bridge_release", keys, [celery_task_id, entry.to_json(), self.ttl])

    def is_published(self, celery_task_id: str) -> bool:
        return bool(self.client.exists(self.published_prefix + celery_task_id))


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
