"""Purging solves: every solve still waiting for a provider's thread ends as revoked.

A solve is admitted (recorded in Redis, its message acknowledged) as soon as a worker
receives it, so the broker's queue is empty while solves wait for a thread: Celery's
``purge``, which empties the broker's queues, finds nothing of them. Here they are ended
as Celery ends a revoked task (each caller's ``get()`` raises ``TaskRevokedError``),
sending nothing to a provider. Solves at a provider already are not purged (nor are the
tasks Celery's ``purge`` finds running): revoke them by id.

Two ways in: ``captcha-tasks purge``, and ``celery -A captcha_tasks purge``, whose purge
of a queue solves are sent to ends the waiting solves too
(:mod:`.celery_internals.broker`).
"""

from __future__ import annotations

import socket
from typing import Any

from ..engine.finish import revoked_fields
from ..engine.jobs import Job
from ..engine.loop import claim_seconds
from ..engine.pool import TokenPool
from ..engine.queue import SolveQueue
from ..settings import Settings, get_settings
from ..settings.parsing import CAPTCHA_TYPES
from ..state import state_redis
from ..state.clock import clock_of

__all__ = ["PURGE_REASON", "purge_waiting_solves", "solve_queues"]


#: The reason a purged solve's revocation gives.
PURGE_REASON = "purged"
#: Waiting solves read from Redis at a time.
_CHUNK = 500


def solve_queues(app: Any) -> set[str]:
    """The queues the solve tasks are sent to, as the app routes them by name (a
    process that only sends tasks has not registered them)."""
    names = set()
    for kind in CAPTCHA_TYPES:
        queue = app.amqp.router.route({}, f"captcha_tasks.solve_{kind}").get("queue")
        names.add(str(getattr(queue, "name", queue)))
    return names


def purge_waiting_solves(app: Any, settings: Settings | None = None) -> int:
    """End every solve waiting for a thread as revoked (none is sent to a provider);
    how many. Each one's outcome is stored as Celery stores a revoked task's."""
    from .engine_step import CeleryCompleter  # the Celery side: loaded only to purge

    settings = settings or get_settings()
    client = state_redis(settings)
    queue = SolveQueue(client, settings, claim_s=claim_seconds(settings))
    completer = CeleryCompleter(app, f"purge@{socket.gethostname()}")
    clock = clock_of(client)
    pool = TokenPool(client, settings)
    fields = revoked_fields(PURGE_REASON)
    purged = 0
    while True:
        ids = client.zrange(queue.keys.waiting, 0, _CHUNK - 1)
        if not ids:
            return purged
        moved = False
        for raw_id in ids:
            task_id = str(raw_id)
            raw = queue.job_fields(task_id)
            if not raw:
                client.zrem(queue.keys.waiting, task_id)  # a stale entry: its job is gone
                moved = True
                continue
            job = Job.from_fields(task_id, raw)
            if not queue.revoke_unsent(job, fields, clock(), waiting_only=True):
                continue  # taken for a submit meanwhile: it runs
            if job.pool:
                pool.fill_ended(job.pool, task_id)
            else:
                completer.revoke(job, PURGE_REASON)
            queue.reported(task_id)
            purged += 1
            moved = True
        if not moved:
            return purged
