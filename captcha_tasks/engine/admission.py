"""Admitting a solve request: validate it, then record it in Redis exactly once."""

from __future__ import annotations

import json
from collections.abc import Sequence

import redis

from ..provider import Captcha
from ..settings import Settings
from ..state.clock import clock_of
from ..state.keys import STRUCTURE_TTL, Keys
from ..state.scripts import run
from .jobs import captcha_to_json
from .timing import DEADLINE, TOKEN_TTL

__all__ = ["ADMITTED", "POOLED", "SEEN", "admit", "admit_unless_pooled"]

#: What :func:`admit_unless_pooled` did: queued the request; found its task id admitted
#: before (nothing queued); found a token pool that may serve it (nothing queued).
SEEN, ADMITTED, POOLED = 0, 1, 2


def admit(
    client: redis.Redis,
    settings: Settings,
    task_id: str,
    captcha: Captcha,
    *,
    now: float | None = None,
    request: dict[str, object] | None = None,
    pool: str = "",
    proxy_id: str = "",
    route: Sequence[str] = (),
) -> bool:
    """Queue ``captcha`` for a thread under ``task_id``. False if that task id was
    admitted before (a redelivered message): nothing is queued twice.

    ``request``: the admitting Celery request's routing fields (chain, callbacks,
    errbacks, chord, group), kept so the engine can end the task as a worker would.
    ``pool``: admit a fill job whose token goes to that pool.
    ``proxy_id``: a proxy of the pool the provider solves through (the id only: the
    engine reads the credentials from the pool when it submits).

    Raises :class:`~captcha_tasks.errors.InvalidTaskInput` before touching Redis if
    the captcha is not valid.
    """
    outcome = admit_unless_pooled(
        client,
        settings,
        task_id,
        captcha,
        now=now,
        request=request,
        pool=pool,
        proxy_id=proxy_id,
        route=route,
    )
    return outcome == ADMITTED


def admit_unless_pooled(
    client: redis.Redis,
    settings: Settings,
    task_id: str,
    captcha: Captcha,
    *,
    pool_id: str = "",
    now: float | None = None,
    request: dict[str, object] | None = None,
    pool: str = "",
    proxy_id: str = "",
    route: Sequence[str] = (),
    trace: str = "",
) -> int:
    """:func:`admit`, in the same round trip as the look for a token pool ``pool_id``
    (the pool of ``captcha``; "" for none): :data:`POOLED` without queueing anything
    if that pool has tokens or is registered (take from it, then :func:`admit`),
    :data:`SEEN` for a task id admitted before, else :data:`ADMITTED`. ``trace``: the
    solve's trace context (:func:`captcha_tasks.tracing.carrier`), kept with the job."""
    captcha.validate(max_image_bytes=settings.max_image_bytes)
    now = clock_of(client)() if now is None else now  # compared by every engine
    deadline_s = settings.scaled(DEADLINE[captcha.type])
    token_ttl = TOKEN_TTL.get(captcha.type)
    # A thread's lease outlives every legitimate holder: a solve's deadline plus the
    # longest provider call; only a job nobody finishes lets it run out.
    lease_s = deadline_s + 2 * (min(5.0, settings.http_timeout) + settings.http_timeout) + 5.0
    job_ttl = int(settings.queue_timeout + deadline_s + lease_s + settings.report_window)
    fields: dict[str, str | float] = {
        "type": captcha.type,
        "captcha": captcha_to_json(captcha),
        "enqueued_at": now,
        "queue_deadline": now + settings.queue_timeout,
        "deadline_s": deadline_s,
        "lease_s": lease_s,
        "token_ttl_s": settings.scaled(token_ttl) if token_ttl else "",
        "submits": 0,
        "resubmits": 0,
        "polls": 0,
        "pool": pool,
        "proxy_id": proxy_id,
        "route": ",".join(route),
        "request": json.dumps(request, separators=(",", ":"), default=str) if request else "",
        # The admission span's context: the engine's spans join the caller's trace.
        "trace": trace,
    }
    keys = Keys(settings.key_prefix)
    providers = settings.providers()
    args: list[str | float | int] = [
        task_id,
        now,
        job_ttl,
        STRUCTURE_TTL,
        pool_id,
        len(providers),
        *(p.threads for p in providers),
    ]
    for name, value in fields.items():
        args += [name, value]
    names = [
        keys.job(task_id),
        keys.waiting,
        keys.wake,
        *(keys.provider_budget(p.name) for p in providers),
    ]
    if pool_id:
        names += [keys.pool(pool_id), keys.pools]
    return int(run(client, "admit", names, args))
